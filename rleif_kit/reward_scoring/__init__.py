"""Loading the trained reward models and scoring with them (IRM rI, PRM step scores, rA), used by PPO and 07."""
