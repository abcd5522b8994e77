"""Test helpers that demos and benchmarks start too (the loopback OpenAI-compatible teacher); no product module imports them."""
