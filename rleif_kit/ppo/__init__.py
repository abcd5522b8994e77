"""Stage 05: the reward-health gate and our own PPO loop with r = rI * rA (and GRPO through TRL)."""

from rleif_kit.core.moved import moved_attribute


def __getattr__(name: str):
    return moved_attribute(__name__, name)  # an old `from rleif_kit.ppo import name` names the new module
