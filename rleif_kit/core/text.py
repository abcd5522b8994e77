"""Cutting generated text at stop strings: one rule for local generation, vLLM, served models and the local
chat backend (the earliest stop string wins, wherever it starts)."""

from __future__ import annotations

from typing import Sequence


def stop_index(text: str, stop: Sequence[str]) -> int | None:
    """Where the earliest of the ``stop`` strings starts in ``text``; None when none occurs (empty ones ignored)."""
    cuts = [i for i in (text.find(s) for s in stop if s) if i >= 0]
    return min(cuts) if cuts else None


def cut_at_stop(text: str, stop: Sequence[str]) -> str:
    """``text`` up to the earliest of the ``stop`` strings (all of it when none occurs)."""
    i = stop_index(text, stop)
    return text if i is None else text[:i]
