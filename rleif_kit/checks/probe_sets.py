"""What the counterfactual probes edit: right solutions and clean instructions the reward models never trained on.

The arithmetic world has both at hand: the run's fixed held-out problems (never trained on by SFT, the reward
models or PPO) with their gold step-by-step solutions, and the evolver's injected defects to make a question
unsolvable or ambiguous. Another world gets an empty set here until its held-out items carry gold solutions
in the step format (the checks then say they were skipped, and why).
"""

from __future__ import annotations

from typing import Any

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.evolver import ambiguous_text, unsolvable_text
from rleif_kit.worlds.counterfactuals import drop_number
from rleif_kit.worlds.data import heldout_problems
from rleif_kit.core.jsonl import read_jsonl

NO_PROBE_SET = "no held-out gold solutions in the step format for this world yet (the arithmetic world has them)"


def _heldout(cfg: Any, paths: Any) -> list[dict]:
    """The run's held-out problems: its file when written, else the same problems drawn in memory (a check only
    reads; it writes no file)."""
    if paths.arith_heldout.exists():
        return list(read_jsonl(paths.arith_heldout))
    a = cfg.arith
    return arith.generate_splits(1, a.heldout_size, seed=cfg.base.seed, min_steps=a.min_steps,
                                 max_steps=a.max_steps, max_operand=a.max_operand)[1]


def probe_solutions(cfg: Any, paths: Any) -> list[dict]:
    """Right solutions as instruction records: ``{"id", "text", "solution", "problem"}`` ([] outside arith)."""
    if cfg.base.world != "arith":
        return []
    return [{"id": p["id"], "text": p["question"], "solution": p["solution"], "problem": p}
            for p in _heldout(cfg, paths)]


def instruction_probe_pairs(cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
    """(clean, edited) instruction pairs per edit that must lower rI ({} outside arith)."""
    if cfg.base.world != "arith":
        return {}
    problems = _heldout(cfg, paths)
    out: dict[str, list[tuple[str, str]]] = {"unsolvable": [], "ambiguous": [], "number_removed": []}
    for i, p in enumerate(problems):
        problem = arith.Problem.from_record(p)
        out["unsolvable"].append((p["question"], unsolvable_text(problem, seed=cfg.base.seed + i)))
        out["ambiguous"].append((p["question"], ambiguous_text(problem, seed=cfg.base.seed + i)))
        dropped = drop_number(p["question"])
        if dropped is not None:
            out["number_removed"].append((p["question"], dropped))
    return out


def answer_edits(cfg: Any, paths: Any, n: int = 300) -> dict[str, list[tuple[str, str]]]:
    """(question, solution) of the first ``n`` held-out 3-step problems three ways: ``complete`` (gold),
    ``early`` (stopped one step early, answering the intermediate result: the tiny teacher's error) and ``wrong``
    (the answer line says 999) — what tells whether a PRM reads the answer ({} outside arith)."""
    if cfg.base.world != "arith":
        return {}
    problems = [p for p in heldout_problems(cfg, paths) if p["n_steps"] == 3][:n]
    complete = [(p["question"], p["solution"]) for p in problems]
    return {"complete": complete,
            "early": [(p["question"], arith.Problem.from_record(p).early_stop_solution()) for p in problems],
            "wrong": [(q, s.rsplit("The answer is:", 1)[0] + "The answer is: 999") for q, s in complete]}
