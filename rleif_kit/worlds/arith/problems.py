"""A small, verifiable arithmetic world that stands in for GSM8k in the CPU demo.

Why it exists: the real pipeline needs word problems with step-by-step solutions, a way to
evolve problems (add/remove steps, change topic) and a process reward model labeller. GSM8k
is too hard for a ~300k-parameter model trained for minutes on a CPU, so this module makes
GSM8k-*shaped* problems with small numbers whose every step can be checked exactly.

Problems are stored structurally (:class:`Problem`: topic, person, start quantity and a
tuple of :class:`Op`), and the text is *rendered* from that structure deterministically, so
an evolver can edit the structure and get a consistent question, solution and answer back.

Canonical solution format (one line, regular so a tiny model can learn it)::

    Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass

from rleif_kit.worlds.arith.words import (
    HE_NAMES,
    IMPLICIT,
    IMPLICIT_WORDS,
    INTROS,
    OP_TEMPLATES,
    PRONOUNS,
    QUESTIONS,
    RELATIVES,
    SHE_NAMES,
    TOPICS,
)
from rleif_kit.worlds.steps import STEPWISE

MAX_VALUE = 999  # every intermediate result stays in [0, MAX_VALUE] so answers stay short
SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "div": "/"}
KIND_WEIGHTS = {"add": 4, "sub": 3, "mul": 2, "div": 2}  # add/sub dominate, as in GSM8k
FACTORS = (2, 3, 4, 5)  # mul operands and div divisors: small, so products stay learnable


def apply_op(kind: str, a: int, b: int) -> int:
    """Exact integer semantics of one op; an inexact division is an error, never rounded."""
    if kind == "div" and (b == 0 or a % b):
        raise ValueError(f"inexact division {a} / {b}")
    return {"add": a + b, "sub": a - b, "mul": a * b, "div": a // b if b else 0}[kind]


def op_templates(topic: str, kind: str) -> list[str]:
    """All templates usable for ``kind`` in ``topic`` (generic ones first, then the topic's)."""
    extra = [TOPICS[topic][kind]] if kind in ("add", "sub") else []
    return OP_TEMPLATES[kind] + extra


def _pronouns(name: str) -> dict[str, str]:
    """he/she for known names; unknown names repeat the name, which is always grammatical."""
    key = "he" if name in HE_NAMES else "she" if name in SHE_NAMES else None
    sub, pos, obj = PRONOUNS[key] if key else (name, f"{name}'s", name)
    return {"sub": sub, "pos": pos, "obj": obj, "Sub": sub[0].upper() + sub[1:],
            "Pos": pos[0].upper() + pos[1:]}


def _sentence(template: str, **fields) -> str:
    text = template.format(**fields)
    return text[0].upper() + text[1:]


@dataclass(frozen=True)
class Op:
    """One step of a problem; ``template`` pins the wording so rendering is deterministic."""
    kind: str
    value: int
    template: int


@dataclass(frozen=True)
class Problem:
    """Structural word problem: text, solution and answer are all derived from these fields."""
    topic: str
    name: str
    item: str
    start: int
    ops: tuple[Op, ...]
    intro: int
    question_form: int

    def _fields(self) -> dict:
        return dict(name=self.name, item=self.item, start=self.start,
                    place=TOPICS[self.topic]["place"], **_pronouns(self.name))

    def _render_op(self, i: int, op: Op) -> str:
        """Render step i; verb/relative choice rotates with i and start for variety."""
        topic = TOPICS[self.topic]
        k = i + self.start + op.template
        word = ""
        if (op.kind, op.template) in IMPLICIT:
            word = IMPLICIT[(op.kind, op.template)].get(op.value, "")
            if not word:
                raise ValueError(f"template {op.template} cannot express {op.kind} {op.value}")
        return _sentence(op_templates(self.topic, op.kind)[op.template], n=op.value,
                         gain=topic["gain"][k % len(topic["gain"])], word=word,
                         lose=topic["lose"][k % len(topic["lose"])],
                         rel=RELATIVES[k % len(RELATIVES)], **self._fields())

    def question(self) -> str:
        parts = [_sentence(INTROS[self.intro], **self._fields())]
        parts += [self._render_op(i, op) for i, op in enumerate(self.ops)]
        parts.append(_sentence(QUESTIONS[self.question_form], **self._fields()))
        return " ".join(parts)

    def step_values(self) -> list[tuple[int, str, int, int]]:
        """(a, sym, b, result) per step; the left operand chains from the previous result."""
        steps, cur = [], self.start
        for op in self.ops:
            a, cur = cur, apply_op(op.kind, cur, op.value)
            steps.append((a, SYMBOLS[op.kind], op.value, cur))
        return steps

    def answer(self) -> int:
        steps = self.step_values()
        return steps[-1][3] if steps else self.start

    def solution(self) -> str:
        return format_solution(self.step_values(), self.answer())

    def early_stop_solution(self) -> str:
        """The solution of a teacher that stops one step early and answers the intermediate result."""
        steps = self.step_values()[:-1]
        return format_solution(steps, steps[-1][3] if steps else self.start)

    def to_record(self, id: str) -> dict:
        return {"id": id, "question": self.question(), "solution": self.solution(),
                "answer": self.answer(), "n_steps": len(self.ops), "topic": self.topic,
                "problem": asdict(self)}

    @staticmethod
    def from_record(rec: dict) -> "Problem":
        """Accepts a full record or just its ``"problem"`` dict (JSON turns tuples to lists)."""
        p = rec.get("problem", rec)
        ops = tuple(Op(o["kind"], int(o["value"]), int(o["template"])) for o in p["ops"])
        return Problem(p["topic"], p["name"], p["item"], int(p["start"]), ops,
                       int(p["intro"]), int(p["question_form"]))


# ----------------------------------------------------------------------------- generation

def _candidates(kind: str, cur: int, max_operand: int) -> list[int]:
    """Operands for ``kind`` that keep the running value in [0, MAX_VALUE] (divisions exact)."""
    if kind == "add":
        return list(range(1, min(max_operand, MAX_VALUE - cur) + 1))
    if kind == "sub":
        return list(range(1, min(max_operand, cur) + 1))
    if kind == "mul":
        return [k for k in FACTORS if cur >= 1 and cur * k <= MAX_VALUE]
    return [k for k in FACTORS if cur >= k and cur % k == 0]


def random_op(rng: random.Random, topic: str, cur: int, max_operand: int = 20) -> Op:
    """Sample one feasible op; infeasible kinds (e.g. inexact division) are resampled."""
    kinds, weights = list(KIND_WEIGHTS), list(KIND_WEIGHTS.values())
    for _ in range(100):
        kind = rng.choices(kinds, weights)[0]
        values = _candidates(kind, cur, max_operand)
        if values:
            break
    else:  # pragma: no cover - add or sub is always feasible for cur in [0, 999]
        raise RuntimeError(f"no feasible op from {cur}")
    value = rng.choice(values)
    templates = [t for t in range(len(op_templates(topic, kind)))
                 if value in IMPLICIT.get((kind, t), {value: ""})]
    return Op(kind, value, rng.choice(templates))


def random_problem(rng: random.Random, min_steps: int = 1, max_steps: int = 3,
                   max_operand: int = 20) -> Problem:
    """Sample a problem; step count is uniform in [min_steps, max_steps]."""
    topic = rng.choice(sorted(TOPICS))
    name = rng.choice(HE_NAMES + SHE_NAMES)
    item = rng.choice(TOPICS[topic]["items"])
    start = rng.randint(2, max(2, max_operand))
    ops, cur = [], start
    for _ in range(rng.randint(min_steps, max_steps)):
        op = random_op(rng, topic, cur, max_operand)
        ops.append(op)
        cur = apply_op(op.kind, cur, op.value)
    return Problem(topic, name, item, start, tuple(ops), rng.randrange(len(INTROS)),
                   rng.randrange(len(QUESTIONS)))


def generate_problems(n: int, seed: int, min_steps: int = 1, max_steps: int = 3,
                      max_operand: int = 20, prefix: str = "arith") -> list[dict]:
    """``n`` records with ids ``{prefix}-{i:06d}``; same seed, same records."""
    rng = random.Random(seed)
    return [random_problem(rng, min_steps, max_steps, max_operand).to_record(f"{prefix}-{i:06d}")
            for i in range(n)]


def generate_splits(train_n: int, heldout_n: int, seed: int, min_steps: int = 1,
                    max_steps: int = 3, max_operand: int = 20) -> tuple[list[dict], list[dict]]:
    """Train and held-out records with pairwise distinct question texts.

    Why: held-out accuracy must measure generalisation, so no held-out question text may
    appear in train. Duplicates are simply skipped (also within a split).
    """
    rng, seen, problems = random.Random(seed), set(), []
    budget = 50 * (train_n + heldout_n) + 1000  # guards against a too-small problem space
    while len(problems) < train_n + heldout_n:
        budget -= 1
        if budget < 0:
            raise ValueError("problem space too small for that many distinct problems")
        p = random_problem(rng, min_steps, max_steps, max_operand)
        if p.question() not in seen:
            seen.add(p.question())
            problems.append(p)
    held = [p.to_record(f"arith-heldout-{i:06d}") for i, p in enumerate(problems[:heldout_n])]
    train = [p.to_record(f"arith-train-{i:06d}") for i, p in enumerate(problems[heldout_n:])]
    return train, held


# ---------------------------------------------------------------------- parsing / checking

NUM = r"-?\d+(?:,\d{3})*"
STEP_MARK = STEPWISE.marker  # the shared step format (worlds/steps.py)
ANSWER_MARK = STEPWISE.answer
STEP_RE = re.compile(rf"^(?:Step\s*\d+\s*:)?\s*({NUM})\s*([-+*/])\s*({NUM})\s*=\s*({NUM})\s*\.?$",
                     re.I)


def format_solution(steps: list[tuple[int, str, int, int]], answer) -> str:
    body = " ".join(f"Step {i}: {a} {s} {b} = {c}." for i, (a, s, b, c) in enumerate(steps, 1))
    return f"{body} The answer is: {answer}".strip()


def parse_steps(solution: str) -> list[str]:
    """Split into ``"Step k: ..."`` segments (marker kept, so they re-join to the solution).

    Text before the first marker and the trailing ``The answer is:`` part are dropped.
    Returns [] when there are no step markers.
    """
    return STEPWISE.segments(solution)


def _normalise(token: str) -> str:
    """'1,000' -> '1000', '6.' / '6.0' -> '6'; keeps answers comparable as plain strings."""
    token = token.replace(",", "").rstrip(".")
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    return token


def _as_int(token: str | None) -> int | None:
    return int(token) if token is not None and re.fullmatch(r"-?\d+", token) else None


def extract_answer(text: str) -> str | None:
    """First number after the LAST 'The answer is:' (models may restate the line), or None."""
    parts = ANSWER_MARK.split(text)
    if len(parts) < 2:
        return None
    m = re.search(r"-?\d[\d,]*(?:\.\d+)?", parts[-1])
    return _normalise(m.group()) if m else None


def question_numbers(question: str) -> list[int]:
    """Numbers in the question, in order, incl. implied ones ("doubles" -> 2, "half" -> 2).

    Why: the verifier accepts an operand only if the question states it, and wording such
    as "doubles" states a 2 without a digit.
    """
    words = "|".join(IMPLICIT_WORDS)
    out = []
    for m in re.finditer(rf"\d+(?:,\d{{3}})*|\b(?:{words})\b", question, re.I):
        tok = m.group().lower()
        out.append(IMPLICIT_WORDS[tok] if tok in IMPLICIT_WORDS else int(tok.replace(",", "")))
    return out


@dataclass(frozen=True)
class Verification:
    """Per-step verdicts plus the final-answer verdict for one solution."""
    step_ok: list[bool]
    step_reasons: list[str]
    answer: str | None
    answer_ok: bool

    @property
    def all_ok(self) -> bool:
        return bool(self.step_ok) and all(self.step_ok) and self.answer_ok


def _check_step(step: str, known: set[int]) -> tuple[str, int | None]:
    """Reason ('' if ok) and the step's claimed result (None if unparseable)."""
    m = STEP_RE.match(step.strip())
    if not m:
        return "unparseable step", None
    a, b, c = (int(m.group(i).replace(",", "")) for i in (1, 3, 4))
    sym = m.group(2)
    kind = {v: k for k, v in SYMBOLS.items()}[sym]
    if kind == "div" and (b == 0 or a % b):
        return f"division not exact: {a} / {b}", c
    if apply_op(kind, a, b) != c:
        return f"arithmetic: {a} {sym} {b} != {c}", c
    for x in (a, b):
        if x not in known:
            return f"operand {x} not in problem or earlier steps", c
    return "", c


def verify_solution(question: str, solution: str, gold: int | str) -> Verification:
    """Check each step locally and the final answer against ``gold``.

    Each step must parse as ``a op b = c``, be exactly right (integer division exact) and use
    only numbers from the question or results *claimed* by earlier steps; so an error is
    flagged where it is made, not again downstream (a PRM labeller may mark later steps
    itself). A solution without step markers is treated as ONE step made of the whole text,
    which is then normally unparseable, so callers see it as a failed step, not as no steps.
    """
    steps = parse_steps(solution) or [solution]
    known = set(question_numbers(question))
    oks, reasons = [], []
    for step in steps:
        reason, result = _check_step(step, known)
        oks.append(not reason)
        reasons.append(reason)
        if result is not None:
            known.add(result)
    answer = extract_answer(solution)
    got, want = _as_int(answer), _as_int(_normalise(str(gold).strip()))
    return Verification(oks, reasons, answer, got is not None and got == want)
