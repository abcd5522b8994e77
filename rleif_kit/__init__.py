"""rleif-kit: a notebook-driven reproduction kit for RLEIF (Reinforced Evol-Instruct).

Each pipeline stage is a plain function ``run_<stage>(cfg, paths)`` that a numbered notebook
under ``notebooks/`` calls; ``rleif run params/<run>.toml`` runs those notebooks headless. The package
has one subpackage per stage (``prepare``, ``evolve``, ``dedup``, ``sft``, ``rewards``, ``ppo``, ``evaluation``,
``diagnostics``; a later stage may call an earlier one), the shared pieces below them and ``pipeline`` above:
docs/layout.md has the map.
"""

__version__ = "0.1.0"
