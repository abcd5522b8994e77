"""What the counterfactual probes edit: right solutions and clean instructions the reward models never trained on,
asked of the run's world (``World.probe_solutions``, ``instruction_probe_pairs``, ``answer_edits``).

The arithmetic world has both at hand: the run's fixed held-out problems with their gold step-by-step solutions,
and the evolver's injected defects to make a question unsolvable or ambiguous. The tiny code world probes its
held-out tasks' right programs (and makes a task unsolvable by no longer saying what to return); the math world
its held-out test items in the step format (``00_setup/probe_set.jsonl``). A world without such a set (the code
world) gets empty ones here (the checks then say they were skipped, and why).
"""

from __future__ import annotations

from typing import Any

from rleif_kit.worlds import world_for

NO_PROBE_SET = "this world has no held-out items with right solutions to edit (World.probe_solutions)"


def probe_solutions(cfg: Any, paths: Any) -> list[dict]:
    """Right solutions as instruction records: ``{"id", "text", "solution", ...}`` ([] without a probe set)."""
    return world_for(cfg).probe_solutions(cfg, paths)


def instruction_probe_pairs(cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
    """(clean, edited) instruction pairs per edit that must lower rI ({} without a probe set)."""
    return world_for(cfg).instruction_probe_pairs(cfg, paths)


def answer_edits(cfg: Any, paths: Any, n: int = 300) -> dict[str, list[tuple[str, str]]]:
    """(question, solution) three ways — ``complete``, ``early``, ``wrong`` — that tell whether a PRM reads the
    answer ({} without such a set)."""
    return world_for(cfg).answer_edits(cfg, paths, n)
