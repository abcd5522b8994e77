"""Stage 07: reads every artifact of a run into the reward-health checks."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.diagnostics import name` names the new module
