"""Stage 06: GSM8k / MATH / HumanEval / arithmetic evaluation with the published prompts, sandboxed code, the SFT-vs-PPO A/B."""

from rleif_kit.core.moved import moved_module


def __getattr__(name: str):
    moved_module(__name__, name)  # an old `from rleif_kit.evaluation import prompts` names the new module
