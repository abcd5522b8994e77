"""Stage 01: Evol-Instruct over the seeds, crash-safe JSONL; and the engine (operators, evolvers, elimination,
fan-out) that 04's IRM fan-out calls too."""
