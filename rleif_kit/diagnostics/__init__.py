"""Stage 07: reads every artifact of a run into the reward-health checks."""
