"""Stage 04: the instruction reward model (IRM) and the process reward model (PRM), their judges and labels."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.rewards import name` names the new module
