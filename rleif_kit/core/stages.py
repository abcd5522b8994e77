"""The stage names: one table that resume markers, metrics, the loop, the runner and ``RunPaths`` key by.

A stage's name is its notebook's name and its folder under ``[base].output_dir``; the numbers stay fixed,
so markers, baselines and users' scripts keep working.
"""

from __future__ import annotations

SETUP = "00_setup"
EVOLVE = "01_evolve"
DEDUP = "02_dedup"
SFT = "03_sft"
REWARD_MODELS = "04_reward_models"
PPO = "05_ppo"
EVAL = "06_eval"
DIAGNOSTICS = "07_reward_diagnostics"

STAGES = (SETUP, EVOLVE, DEDUP, SFT, REWARD_MODELS, PPO, EVAL, DIAGNOSTICS)
LOOP_STAGES = (EVOLVE, DEDUP, SFT, REWARD_MODELS, PPO, EVAL)  # what each iteration of [loop] reruns
