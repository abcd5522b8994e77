"""Stage 04: the instruction reward model (IRM) and the process reward model (PRM), their judges and labels; and
the reward r itself (``reward.py``: rI, rA, rV, rF and r of a rollout), which 05 and 07 score with."""
