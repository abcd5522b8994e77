"""The math world."""
