"""A programmatic Evol-Instruct evolver for the arithmetic world, so the CPU demo needs no endpoint.

It plays the LLM evolver's part on structural :class:`rleif_kit.worlds.arith.problems.Problem` values: an
operator edits the structure (add a step, swap ``+`` for ``*``, drop a step, change topic) and
the question is re-rendered, so the evolved text, its solution and its answer always agree.
Like a real model it sometimes fails, at the rates in :class:`DefectRates`; the failure is
recorded in ``Evolved.defect`` (ground truth, never shown to models) so that the elimination
rules (:mod:`rleif_kit.evolve.elimination`) and, later, the instruction reward model can be scored on
exactly the defects they are meant to catch.

    from rleif_kit.worlds.arith import problems as arith
    from rleif_kit.worlds.arith import evolver as arith_evolver
    rng = random.Random(0)
    ev = arith_evolver.evolve_arith(arith.random_problem(rng), "more_steps", rng)
"""
from __future__ import annotations

import random
import re
from dataclasses import asdict, dataclass, fields, replace

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.problems import Op, Problem, apply_op
from rleif_kit.worlds.arith.words import INTROS, QUESTIONS, TOPICS

UP_OPERATORS = ("add_constraint", "concretize", "more_steps", "deepen")
DOWN_OPERATORS = ("simplify", "new_topic")


@dataclass(frozen=True)
class DefectRates:
    """Probability of each defect per evolution; at most one defect is applied, so sum <= 1."""
    leaked_template: float = 0.03  # "#Rewritten Prompt#:" inside, "(rewritten from the given prompt)"
    malformed: float = 0.03        # truncated mid-sentence (finish_reason "length") or garbled
    unsolvable: float = 0.05       # a number the solution needs became "some" / "a few"
    ambiguous: float = 0.04        # asks about an unmentioned item/person, or contradicts itself
    no_change: float = 0.03        # the parent back, unchanged or trivially reworded
    refusal: float = 0.01          # "I'm sorry, but I can't rewrite this problem."

    def __post_init__(self):
        bad = [f.name for f in fields(self) if not 0.0 <= getattr(self, f.name) <= 1.0]
        if bad:
            raise ValueError(f"DefectRates: {', '.join(bad)} must be in [0, 1]")
        total = sum(getattr(self, f.name) for f in fields(self))
        if total > 1.0 + 1e-9:
            raise ValueError(f"DefectRates: rates sum to {total:.3f}; at most one defect is "
                             "applied per evolution, so they must sum to <= 1")

    @classmethod
    def none(cls) -> "DefectRates":
        """A perfect evolver: every rate 0."""
        return cls(**{f.name: 0.0 for f in fields(cls)})

    @classmethod
    def only(cls, defect: str, rate: float = 1.0) -> "DefectRates":
        """One defect at ``rate``, all others 0 (handy for tests and diagnostics)."""
        return replace(cls.none(), **{defect: rate})


@dataclass(frozen=True)
class Evolved:
    """One evolution as a model would return it, plus the ground truth behind it."""
    text: str                 # the evolved instruction (may be defective)
    problem: dict | None      # Problem.to_record()["problem"]; None for malformed / refusal
    answer: str | None        # canonical solution when the text is solvable as written
    defect: str | None        # None or a DefectRates field name
    finish_reason: str = "stop"  # as an API reports it: "length" when the output was cut off


# ------------------------------------------------------------------------ structure edits

def _valid(kind: str, value: int, cur: int) -> bool:
    """Same ranges as arith._candidates: result in [0, MAX_VALUE], divisions exact."""
    if kind == "mul":
        return cur >= 1 and cur * value <= arith.MAX_VALUE
    if kind == "div":
        return cur >= value > 0 and cur % value == 0
    return 0 <= apply_op(kind, cur, value) <= arith.MAX_VALUE


def _fit(topic: str, kind: str, value: int, template: int, rng: random.Random) -> Op:
    """An op with ``template`` if it can say ``value`` ("doubles" cannot say 4), else another."""
    ok = [t for t in range(len(arith.op_templates(topic, kind)))
          if value in arith.IMPLICIT.get((kind, t), {value: ""})]
    return Op(kind, value, template if template in ok else rng.choice(ok))


def _running(p: Problem) -> list[int]:
    """The value before each op, then the answer: [start, after op 1, ..., answer]."""
    return [p.start] + [s[3] for s in p.step_values()]


def _repair(p: Problem, ops: tuple[Op, ...], rng: random.Random, max_operand: int) -> Problem:
    """Keep every op that stays in range after an edit upstream; resample the others."""
    out, cur = [], p.start
    for op in ops:
        if not _valid(op.kind, op.value, cur):
            op = arith.random_op(rng, p.topic, cur, max_operand)
        out.append(op)
        cur = apply_op(op.kind, cur, op.value)
    return replace(p, ops=tuple(out))


def _add_step(p: Problem, rng: random.Random, max_operand: int, style: str) -> Problem:
    """One more op. style "append": usually at the end; "new_kind": a new kind of event
    anywhere (the "constraint"); "hard": preferably a mul/div (for deepen)."""
    pos = len(p.ops) if style != "new_kind" and rng.random() < 0.7 else rng.randint(0, len(p.ops))
    cur = _running(p)[pos]
    candidates = [arith.random_op(rng, p.topic, cur, max_operand)
                  for _ in range(1 if style == "append" else 8)]
    kinds, used = {o.kind for o in p.ops}, {(o.kind, o.template) for o in p.ops}
    if style == "hard":
        op = min(candidates, key=lambda o: o.kind not in ("mul", "div"))
    else:
        op = min(candidates, key=lambda o: (o.kind in kinds, (o.kind, o.template) in used))
    return _repair(p, p.ops[:pos] + (op,) + p.ops[pos:], rng, max_operand)


def _chain_ok(start: int, ops: tuple[Op, ...]) -> bool:
    cur = start
    for op in ops:
        if not _valid(op.kind, op.value, cur):
            return False
        cur = apply_op(op.kind, cur, op.value)
    return True


def _harden(p: Problem, rng: random.Random, max_operand: int) -> Problem | None:
    """Replace one add/sub by a mul/div (None when no such swap exists), preferring a swap
    that leaves every later step valid, so the rest of the problem stays as it was."""
    run = _running(p)
    options = [(i, kind, k) for i, op in enumerate(p.ops) if op.kind in ("add", "sub")
               for kind in ("mul", "div") for k in arith.FACTORS if _valid(kind, k, run[i])]
    if not options:
        return None
    rng.shuffle(options)
    tries = []
    for i, kind, k in options:
        op = _fit(p.topic, kind, k, rng.randrange(len(arith.op_templates(p.topic, kind))), rng)
        tries.append(p.ops[:i] + (op,) + p.ops[i + 1:])
        if _chain_ok(p.start, tries[-1]):
            return replace(p, ops=tries[-1])
    return _repair(p, tries[0], rng, max_operand)


def _bigger_numbers(p: Problem, rng: random.Random, max_operand: int) -> Problem:
    start = min(arith.MAX_VALUE, p.start + rng.randint(1, max_operand))
    return _repair(replace(p, start=start), p.ops, rng, max_operand)


def _shrink_numbers(p: Problem, rng: random.Random) -> Problem | None:
    """Same steps with smaller numbers (start and every operand <= before, total < before)."""
    total = p.start + sum(o.value for o in p.ops)
    for _ in range(20):
        start = rng.randint(2, p.start - 1) if p.start > 2 else p.start
        ops, cur = [], start
        for op in p.ops:
            pool = arith.FACTORS if op.kind in ("mul", "div") else range(1, op.value + 1)
            options = [(op.kind, v) for v in pool if v <= op.value and _valid(op.kind, v, cur)]
            if op.kind in ("mul", "div"):  # an easier kind with a smaller operand also counts
                options += [(k, v) for k in ("add", "sub") for v in range(1, op.value)
                            if _valid(k, v, cur)]
            if options:
                kind, v = rng.choice(options)
                new = _fit(p.topic, kind, v, op.template if kind == op.kind else 0, rng)
            else:  # nothing smaller fits (e.g. sub from 0): the smallest addition
                new = Op("add", 1, 0)
            ops.append(new)
            cur = apply_op(new.kind, cur, new.value)
        if start + sum(o.value for o in ops) < total:
            return replace(p, start=start, ops=tuple(ops))
    return None  # already minimal: start 2 and only +1 / -1 steps


def _concretize(p: Problem, rng: random.Random, max_operand: int) -> Problem:
    """Same steps, more specific: another person, another item, or larger numbers."""
    how = rng.choice(("name", "item", "numbers"))
    if how == "name":
        child = replace(p, name=rng.choice([n for n in arith.HE_NAMES + arith.SHE_NAMES
                                            if n != p.name]))
    elif how == "item":
        child = replace(p, item=rng.choice([i for i in TOPICS[p.topic]["items"] if i != p.item]))
    else:
        child = _bigger_numbers(p, rng, max_operand)
    if rng.random() < 0.5:  # and often a different way of telling it
        child = replace(child, intro=rng.randrange(len(INTROS)),
                        question_form=rng.randrange(len(QUESTIONS)))
    return child


def _new_topic(p: Problem, rng: random.Random, min_steps: int, max_operand: int) -> Problem:
    """A fresh problem on another topic with at most the parent's number of steps."""
    topic = rng.choice([t for t in sorted(TOPICS) if t != p.topic])
    n = rng.randint(min(min_steps, len(p.ops)), len(p.ops))
    child = Problem(topic, rng.choice(arith.HE_NAMES + arith.SHE_NAMES),
                    rng.choice(TOPICS[topic]["items"]), rng.randint(2, max(2, max_operand)), (),
                    rng.randrange(len(INTROS)), rng.randrange(len(QUESTIONS)))
    ops, cur = [], child.start
    for _ in range(n):
        ops.append(arith.random_op(rng, topic, cur, max_operand))
        cur = apply_op(ops[-1].kind, cur, ops[-1].value)
    return replace(child, ops=tuple(ops))


def _apply_operator(p: Problem, operator: str, rng: random.Random, max_steps: int,
                    min_steps: int, max_operand: int) -> Problem:
    room = len(p.ops) < max_steps
    if operator == "more_steps":
        child = _add_step(p, rng, max_operand, "append") if room else _harden(p, rng, max_operand)
    elif operator == "add_constraint":
        child = (_add_step(p, rng, max_operand, "new_kind") if room
                 else _harden(p, rng, max_operand))
    elif operator == "deepen":
        child = _harden(p, rng, max_operand)
        child = child or (_add_step(p, rng, max_operand, "hard") if room else None)
    elif operator == "concretize":
        child = _concretize(p, rng, max_operand)
    elif operator == "simplify":
        if len(p.ops) > min_steps:
            i = rng.randrange(len(p.ops))
            child = _repair(p, p.ops[:i] + p.ops[i + 1:], rng, max_operand)
        else:  # at min_steps: smaller numbers; when already minimal, at least a rewording
            child = _shrink_numbers(p, rng) or replace(
                p, intro=(p.intro + 1 + rng.randrange(len(INTROS) - 1)) % len(INTROS))
    else:  # "new_topic" (evolve_arith has checked the name)
        child = _new_topic(p, rng, min_steps, max_operand)
    if child is None:  # no step to add and no op to harden: larger numbers instead
        child = _bigger_numbers(p, rng, max_operand)
    if child.question() == p.question():  # returning the parent is the no_change defect's job
        child = _concretize(child, rng, max_operand)
    return child


# ---------------------------------------------------------------------------------- defects

REFUSALS = ("I'm sorry, but I can't rewrite this problem.",
            "Sorry, I cannot make this problem more difficult without changing its meaning.",
            "As an AI language model, I cannot create a new version of this question.",
            "I'm sorry, but I am unable to help with this request.")
_NOISE = "\ufffd\u20ac\u2122#@%^~|{}<>*&$"  # what a degenerate decode spews


def _sentences(text: str) -> list[str]:
    """arith renders no '.' inside a sentence, so splitting after . ? ! is exact there."""
    return re.split(r"(?<=[.?!])\s+", text)


def _leak(text: str, parent_text: str, rng: random.Random) -> str:
    """Template wording left *inside* the text (a leading label would only be cleaned away)."""
    s = _sentences(text)
    forms = (" ".join(s[:1] + ["#Rewritten Prompt#:"] + s[1:]),
             f"{text} (rewritten from the given prompt)",
             f"The rewritten prompt is: {text}",
             f"{text}\n\n#Given Prompt#: {parent_text}")
    return rng.choice(forms)


def _malform(text: str, rng: random.Random) -> tuple[str, str]:
    """Cut off mid-sentence (finish_reason "length"), or mostly garbage characters."""
    words = text.split(" ")
    if rng.random() < 0.5:
        cuts = [k for k in range(max(2, int(0.3 * len(words))), int(0.85 * len(words)) + 1)
                if not words[k - 1].endswith((".", "?"))]
        return " ".join(words[:rng.choice(cuts)]), "length"
    head = " ".join(words[:max(3, len(words) // 3)])
    noise = "".join(rng.choice(_NOISE) for _ in range(int(2.5 * len(head)) + 10))
    return f"{head} {noise}", "stop"


def _unsolvable(p: Problem, rng: random.Random) -> str:
    """Replace one written number (the start or an explicit operand) by a vague quantity."""
    text = p.question()
    kinds = ["start"] + [o.kind for o in p.ops if (o.kind, o.template) not in arith.IMPLICIT]
    matches = list(re.finditer(r"\b\d+\b", text))
    if len(matches) != len(kinds):  # pragma: no cover - arith writes each needed number once
        raise ValueError(f"cannot map the numbers of {text!r} to its steps")
    j = rng.randrange(len(matches))
    word = "several" if kinds[j] in ("mul", "div") else rng.choice(("some", "a few", "several"))
    head, tail = text[:matches[j].start()], text[matches[j].end():]
    if head.endswith("another "):  # "buys another 5 apples" -> "buys some more apples"
        head, word = head[:-len("another ")], word + " more"
    if head.rstrip()[-1:] in ("", ".", "?", "!"):  # at a sentence start
        word = word[0].upper() + word[1:]
    return head + word + tail


def _ambiguous(p: Problem, rng: random.Random) -> str:
    """Ask about an item or person never mentioned, or state a contradicting start."""
    s = _sentences(p.question())
    how = rng.choice(("item", "person", "contradiction"))
    if how == "item":
        other = rng.choice([i for i in TOPICS[p.topic]["items"] if i != p.item])
        s[-1] = s[-1].replace(p.item, other, 1)
    elif how == "person":
        other = rng.choice([n for n in arith.HE_NAMES + arith.SHE_NAMES if n != p.name])
        s[-1] = re.sub(rf"\b{p.name}\b", other, s[-1], count=1)
    else:
        start = rng.choice([v for v in range(max(2, p.start - 5), p.start + 6) if v != p.start])
        intro = (p.intro + 1 + rng.randrange(len(INTROS) - 1)) % len(INTROS)
        second = _sentences(replace(p, start=start, ops=(), intro=intro).question())[0]
        s.insert(1, second)
    return " ".join(s)


def _unchanged(p: Problem, rng: random.Random) -> Evolved:
    """The parent back: verbatim, behind a label, or with one stop word added."""
    text = p.question()
    s = _sentences(text)
    forms = (text, f"Rewritten problem: {text}",
             " ".join(s[:-1] + ["So, " + s[-1][0].lower() + s[-1][1:]]))
    return Evolved(rng.choice(forms), asdict(p), p.solution(), "no_change")


def _draw_defect(rates: DefectRates, rng: random.Random) -> str | None:
    u, acc = rng.random(), 0.0
    for f in fields(rates):
        acc += getattr(rates, f.name)
        if u < acc:
            return f.name
    return None


def evolve_arith(problem: Problem, operator: str, rng: random.Random, *,
                 rates: DefectRates = DefectRates(), max_steps: int = 5, min_steps: int = 1,
                 max_operand: int = 20) -> Evolved:
    """Evolve ``problem`` with one operator, then apply at most one defect drawn from ``rates``.

    Deterministic for a given ``rng`` state. Clean results satisfy
    ``arith.verify_solution(ev.text, ev.answer, ...)``; defects follow the Evolved field notes.
    """
    if operator not in UP_OPERATORS + DOWN_OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; expected one of "
                         f"{UP_OPERATORS + DOWN_OPERATORS}")
    defect = _draw_defect(rates, rng)
    if defect == "no_change":
        return _unchanged(problem, rng)
    if defect == "refusal":
        return Evolved(rng.choice(REFUSALS), None, None, defect)
    child = _apply_operator(problem, operator, rng, max_steps, min_steps, max_operand)
    text, record, solution = child.question(), asdict(child), child.solution()
    if defect == "leaked_template":
        return Evolved(_leak(text, problem.question(), rng), record, solution, defect)
    if defect == "malformed":
        broken, finish_reason = _malform(text, rng)
        return Evolved(broken, None, None, defect, finish_reason)
    if defect == "unsolvable":
        return Evolved(_unsolvable(child, rng), record, None, defect)
    if defect == "ambiguous":
        return Evolved(_ambiguous(child, rng), record, None, defect)
    return Evolved(text, record, solution, None)


def unsolvable_text(problem: Problem, seed: int = 0) -> str:
    """The problem's question with one needed number made vague (the evolver's injected "unsolvable" defect)."""
    return _unsolvable(problem, random.Random(seed))


def ambiguous_text(problem: Problem, seed: int = 0) -> str:
    """The problem's question made ambiguous (the evolver's injected "ambiguous" defect)."""
    return _ambiguous(problem, random.Random(seed))
