"""The arithmetic world's judges: the quality of an evolved variant (the IRM's ranking) and per-step labels from
the step verifier (the PRM's labels, and the perfect PRM ``answer_reward = "verifier"`` stands in for).

Both are exact because the world knows the truth: the evolver records the defect it injected, and every step
of a solution can be checked. The CPU demo gets real labels without an endpoint.
"""

from __future__ import annotations

from rleif_kit.worlds.arith import problems as arith

# Weights of the arithmetic judge: garbled text or a refusal is worst, then leaked template wording or
# an unchanged copy (integrity), then an unsolvable or ambiguous problem, then one outside the
# configured complexity range. Eliminated variants take part: they are the clearest negatives.
FORMED, NO_LEAK, SOLVABLE, IN_RANGE = 8, 4, 2, 1


def arith_quality(record: dict, min_steps: int = 1, max_steps: int = 5) -> int:
    """Quality score of one arithmetic variant (higher is better), from what the evolver recorded."""
    defect = record.get("defect")
    problem = record.get("problem")
    well_formed = problem is not None and defect not in ("malformed", "refusal")
    steps = len(problem["ops"]) if problem else 0
    return (FORMED * well_formed + NO_LEAK * (defect not in ("leaked_template", "no_change"))
            + SOLVABLE * (record.get("answer") is not None and defect not in ("unsolvable", "ambiguous"))
            + IN_RANGE * (min_steps <= steps <= max_steps))


def verifier_labels(question: str, solution: str, gold, answer_counts: bool = True) -> list[bool]:
    """One label per step (aligned with ``STEPWISE.char_ends``) from :func:`arith.verify_solution`.

    The verifier flags an error only where it is made; here every step after the first wrong
    one is wrong too, because a step built on a wrong result is not a correct step of *this*
    solution, and with ``min`` aggregation the PRM should learn that the chain is broken from
    there on. With ``answer_counts`` a wrong or missing final answer marks the last step wrong:
    otherwise a correct-but-unfinished chain (stopping one op early) scores as fully correct,
    and PPO would learn to stop early. [] when the solution has no step markers.
    """
    if not arith.parse_steps(solution):
        return []
    verdict = arith.verify_solution(question, solution, gold)
    labels, ok = [], True
    for step_ok in verdict.step_ok:
        ok = ok and step_ok
        labels.append(ok)
    if answer_counts and not verdict.answer_ok:
        labels[-1] = False
    return labels
