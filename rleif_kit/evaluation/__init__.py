"""Stage 06: GSM8k / MATH / HumanEval / arithmetic evaluation with the published prompts, sandboxed code, the SFT-vs-PPO A/B."""
