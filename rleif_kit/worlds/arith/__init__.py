"""The arith world."""
