"""Stage 01: Evol-Instruct over the seeds, crash-safe JSONL."""
