"""The arithmetic world: ``problems`` (the structure, rendering, verifier), ``evolver``, ``judge``, ``words``,
``gsm8k_format`` and ``world`` (the World it is)."""
