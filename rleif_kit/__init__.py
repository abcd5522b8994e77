"""rleif-kit: a notebook-driven reproduction kit for RLEIF (Reinforced Evol-Instruct).

Each pipeline stage is a plain function ``run_<stage>(cfg, paths)`` that a numbered notebook
under ``notebooks/`` calls; ``rleif run params/<run>.toml`` runs those notebooks headless. The package
has one subpackage per stage (``evolve``, ``dedup``, ``sft``, ``rewards``, ``ppo``, ``evaluation``,
``diagnostics``), the shared pieces below them and ``pipeline`` above: docs/layout.md has the map.
"""

import sys

from rleif_kit.core.moved import MovedFinder, moved_module

__version__ = "0.1.0"

if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(MovedFinder())  # last: asked only for a module no other finder found


def __getattr__(name: str):
    moved_module(__name__, name)  # an old `from rleif_kit import health` names the new module
