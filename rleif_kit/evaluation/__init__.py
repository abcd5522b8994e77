"""Evaluation: prompt formats, answer extraction, generation and benchmark runners."""
