"""Model loading (full weights, or base plus merged adapter), the tiny Llama, shapes, memory and the planner, batched generation."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.models import name` names the new module
