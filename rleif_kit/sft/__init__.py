"""Stage 03: supervised fine-tuning (QLoRA / LoRA / full)."""
