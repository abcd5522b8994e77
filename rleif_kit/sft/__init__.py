"""Stage 03: supervised fine-tuning (QLoRA / LoRA / full)."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.sft import name` names the new module
