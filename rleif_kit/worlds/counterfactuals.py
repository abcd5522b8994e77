"""Counterfactual edits for the reward probes: a solution (or an instruction) changed in ONE controlled way.

A reward that reads the answer must move the right way under each edit, and must not move under an edit that
keeps the meaning. The edits work on the step format every world writes ("Step 1: ... = 7. Step 2: ...
The answer is: X"), so they apply unchanged to the arithmetic world and to GSM8k/MATH solutions in that
format; each returns None when the solution does not admit it (one step only, no numeric answer, ...), and
the probe then leaves that pair out.

| edit | the reward must |
|---|---|
| ``wrong_answer``: the final answer X replaced by X + 1 in the answer line only | drop |
| ``last_step_slip``: the last step's result and the answer both X + 1 (a slip carried to the answer) | drop |
| ``corrupt_step``: the result of the first step replaced by result + 1 (later steps unchanged) | drop |
| ``cut_answer``: the answer line removed | drop |
| ``early_stop``: the last step removed, answering the new last step's result | drop |
| ``commute``: ``a + b`` written ``b + a`` in the first step with + or × | stay |
| ``number_format``: the final answer written with thousands separators (answers of 1,000 and more) | stay |

For instructions (the IRM): ``drop_number`` removes one number the question needs, so it cannot be solved.
The arithmetic world has its own injected defects (``arith_evolver.unsolvable_text`` / ``ambiguous_text``).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any, Callable

from rleif_kit.worlds.steps import STEPWISE

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:,\d{3})*(?:\.\d+)?(?![\w])")
ANSWER_LINE = re.compile(r"The answer is:\s*", re.I)
BINARY = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([+*×])\s*(\d+(?:\.\d+)?)(?![\w.]\d)")


def _value(token: str) -> Fraction:
    return Fraction(token.replace(",", ""))


def _plain(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def _answer_number(solution: str) -> re.Match | None:
    """The first number after the LAST 'The answer is:' (None when the answer is not a plain number)."""
    marks = list(ANSWER_LINE.finditer(solution))
    if not marks:
        return None
    m = NUMBER.match(solution, marks[-1].end())
    return m


def _steps(solution: str) -> list[tuple[int, int]]:
    """(start, end) of each 'Step k:' segment, the answer line excluded."""
    marks = list(STEPWISE.marker.finditer(solution))
    answer = list(ANSWER_LINE.finditer(solution))
    stop = answer[-1].start() if answer else len(solution)
    bounds = [m.start() for m in marks[1:]] + [stop]
    return [(m.start(), b) for m, b in zip(marks, bounds) if m.start() < stop]


def _result(solution: str, span: tuple[int, int]) -> re.Match | None:
    """The step's result: the last number after its last '='."""
    start, end = span
    eq = solution.rfind("=", start, end)
    if eq < 0:
        return None
    found = list(NUMBER.finditer(solution, eq, end))
    return found[-1] if found else None


def wrong_answer(solution: str) -> str | None:
    """The answer line says X + 1; the steps are unchanged (a reward blind to the answer line ties here)."""
    m = _answer_number(solution)
    if m is None:
        return None
    return solution[:m.start()] + _plain(_value(m.group()) + 1) + solution[m.end():]


def last_step_slip(solution: str) -> str | None:
    """A slip in the last step carried to the answer: both say X + 1, so the solution agrees with itself (the
    wrong answer a policy writes; a reward must check the arithmetic to see it)."""
    m = _answer_number(solution)
    steps = _steps(solution)
    last = _result(solution, steps[-1]) if steps else None
    if m is None or last is None or _value(last.group()) != _value(m.group()):
        return None
    wrong = _plain(_value(m.group()) + 1)
    out = solution[:m.start()] + wrong + solution[m.end():]
    return out[:last.start()] + wrong + out[last.end():]


def corrupt_step(solution: str) -> str | None:
    steps = _steps(solution)
    if len(steps) < 2:
        return None
    m = _result(solution, steps[0])
    if m is None:
        return None
    return solution[:m.start()] + _plain(_value(m.group()) + 1) + solution[m.end():]


def cut_answer(solution: str) -> str | None:
    marks = list(ANSWER_LINE.finditer(solution))
    if not marks or not _steps(solution):
        return None
    return solution[:marks[-1].start()].rstrip()


def early_stop(solution: str) -> str | None:
    steps = _steps(solution)
    marks = list(ANSWER_LINE.finditer(solution))
    if len(steps) < 2 or not marks:
        return None
    m = _result(solution, steps[-2])
    if m is None:
        return None
    last_start, last_end = steps[-1]
    segment = solution[last_start:last_end]
    gap = segment[len(segment.rstrip()):] or " "  # the separator before the answer line (" " or "\n")
    body = solution[:last_start].rstrip()
    return f"{body}{gap}{solution[marks[-1].start():marks[-1].end()]}{m.group()}"


def commute(solution: str) -> str | None:
    """``a + b`` as ``b + a`` in the first step with a single ``+`` or ``*`` (a step with more operators, such as
    ``10 - 3 + 4``, is skipped: swapping there would change its meaning)."""
    for start, end in _steps(solution):
        if len(re.findall(r"[-+*/×÷]", solution[start:end].split("=", 1)[0].split(":", 1)[-1])) != 1:
            continue
        for m in BINARY.finditer(solution, start, end):
            a, b = m.group(1), m.group(3)
            if a != b:
                swapped = m.group().replace(a, "\0", 1).replace(b, a, 1).replace("\0", b, 1)
                return solution[:m.start()] + swapped + solution[m.end():]
    return None


def number_format(solution: str) -> str | None:
    """The final answer with its thousands separated ("1200" -> "1,200"): None below 1000."""
    m = _answer_number(solution)
    if m is None or "," in m.group() or abs(_value(m.group())) < 1000 or _value(m.group()).denominator != 1:
        return None
    return solution[:m.start()] + f"{int(_value(m.group())):,}" + solution[m.end():]


def drop_number(question: str) -> str | None:
    """The question with its first number removed ("starts with 9 plums" -> "starts with plums")."""
    m = NUMBER.search(question)
    if m is None:
        return None
    return re.sub(r"  +", " ", question[:m.start()] + question[m.end():]).strip()


# ---------------------------------------------------------------- hard negatives for PRM training
# Randomised cousins of the edits above, for training rather than probing: the step, the size of the slip and the
# kind vary, so a PRM trained on them has to check the arithmetic rather than learn one fixed edit (the probes keep
# the fixed +1 edits, on held-out problems only). Labels come from the world's step verifier, as a judge's would.


def _delta(rng: Any) -> int:
    return rng.choice((-3, -2, -1, 1, 2, 3))


def slip_step(solution: str, rng: Any) -> str | None:
    """One step's result off by a small amount; on the last step the answer follows it half of the time (a slip
    the policy carries through), else the later steps and the answer stay as they were."""
    steps = _steps(solution)
    if not steps:
        return None
    k = rng.randrange(len(steps))
    m = _result(solution, steps[k])
    if m is None:
        return None
    value = _value(m.group()) + _delta(rng)
    if value < 0:
        return None
    answer = _answer_number(solution)
    out = solution
    if k == len(steps) - 1 and answer is not None and rng.random() < 0.5 and answer.start() > m.end():
        out = out[:answer.start()] + _plain(value) + out[answer.end():]
    return out[:m.start()] + _plain(value) + out[m.end():]


def slip_answer(solution: str, rng: Any) -> str | None:
    """The answer line off by a small amount, the steps right."""
    m = _answer_number(solution)
    if m is None or _value(m.group()) + (d := _delta(rng)) < 0:
        return None
    return solution[:m.start()] + _plain(_value(m.group()) + d) + solution[m.end():]


HARD_NEGATIVES: dict[str, Callable[[str, Any], "str | None"]] = {
    "slip_step": slip_step,
    "slip_answer": slip_answer,
    "stop_early": lambda solution, rng: early_stop(solution),
    "no_answer": lambda solution, rng: cut_answer(solution),
}


Edit = Callable[[str], "str | None"]
SOLUTION_EDITS: dict[str, tuple[Edit, str]] = {  # name -> (edit, the direction the reward must take)
    "wrong_answer": (wrong_answer, "down"),
    "last_step_slip": (last_step_slip, "down"),
    "corrupt_step": (corrupt_step, "down"),
    "cut_answer": (cut_answer, "down"),
    "early_stop": (early_stop, "down"),
    "commute": (commute, "same"),
    "number_format": (number_format, "same"),
}
