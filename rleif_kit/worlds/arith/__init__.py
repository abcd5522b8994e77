"""The arithmetic world: ``problems`` (the structure, rendering, verifier), ``evolver``, ``judge``, ``words``,
``gsm8k_format`` and ``world`` (the World it is)."""

from rleif_kit.core.moved import GUIDE


def __getattr__(name: str):
    # ``from rleif_kit.worlds import arith`` was the problems module before each world became a package
    raise AttributeError(f"rleif_kit.worlds.arith is a package now: {name} is in rleif_kit.worlds.arith.problems "
                         f"(or .evolver, .judge; {GUIDE})")
