"""Stage 05: the reward-health gate and our own PPO loop with r = rI * rA (and GRPO through TRL)."""
