"""Stage 01: Evol-Instruct over the seeds, crash-safe JSONL."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.evolve import name` names the new module
