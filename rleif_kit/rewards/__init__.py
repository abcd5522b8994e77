"""Stage 04: the instruction reward model (IRM) and the process reward model (PRM), their judges and labels."""
