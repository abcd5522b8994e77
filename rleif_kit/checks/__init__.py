"""The pure reward-health checks (functions returning a Verdict), used by the PPO gate, 06's A/B, 07 and doctor."""
