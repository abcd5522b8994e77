"""The code world."""
