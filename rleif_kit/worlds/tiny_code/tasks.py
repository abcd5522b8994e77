"""Programming tasks a tiny Llama learns in minutes on a CPU, each with hidden tests and a reference solution.

Why this world: HumanEval is far beyond a 0.4M-parameter model, and the WizardCoder arm still needs a place where
SFT, the execution reward and PPO can be watched doing something real. A task is a one-line Python function
``f`` over small integers, a list or a string, written in words so the model must map them to code:

    Write a Python function f(a, b) that returns a plus b times 3.
    ```python
    def f(a, b):
        return a + b * 3
    ```

Tasks are stored structurally (:class:`Task`: a family, its variant and arithmetic ops applied to the result),
so an evolver can edit the structure and get a consistent instruction, solution and tests back. Every task has
four tests over fixed inputs (edge cases included: ``a == b``, ``n == 0``, the empty string), computed here
from the structure, never by running code. The tests tell the task's symmetric mistake from the right answer
(:func:`mistaken`: the two parameters swapped, a list or string read from the wrong end) wherever the two differ
on some input: an ``f(a, a)`` test alone cannot tell ``a - b`` from ``b - a``.

Two families carry the systematic faults GPT-written code has, which the tiny teacher makes
(``[tiny_code] teacher_fault``): an **off-by-one** (``range(a, b)`` for "from a to b inclusive") and a **missed
edge case** (``xs[-n:]`` for "the last n items", wrong for n = 0). Execution reward can unlearn both; a PRM
reading only the code's shape cannot tell them from the right answer.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

OP_WORDS = {"+": "plus", "-": "minus", "*": "times"}
# family -> variant -> (phrase, code of the right answer, code the faulty teacher writes or None, numeric result)
FAMILIES: dict[str, dict[str, tuple[str, str, str | None, bool]]] = {
    "expr": {"first": ("{a}", "{a}", None, True), "second": ("{b}", "{b}", None, True)},
    "range": {
        "sum": ("the sum of the integers from {a} to {b} inclusive", "sum(range({a}, {b} + 1))",
                "sum(range({a}, {b}))", True),
        "count": ("how many integers there are from {a} to {b} inclusive", "len(range({a}, {b} + 1))",
                  "len(range({a}, {b}))", True),
    },
    "list": {
        "largest": ("the largest number in the list {xs}", "max({xs})", None, True),
        "smallest": ("the smallest number in the list {xs}", "min({xs})", None, True),
        "total": ("the sum of the numbers in the list {xs}", "sum({xs})", None, True),
        "length": ("the number of items in the list {xs}", "len({xs})", None, True),
        "reversed": ("the list {xs} in reverse order", "{xs}[::-1]", None, False),
        "sorted": ("the list {xs} sorted from smallest to largest", "sorted({xs})", None, False),
    },
    "slice": {
        "first": ("the first {n} items of the list {xs}", "{xs}[:{n}]", None, False),
        "last": ("the last {n} items of the list {xs}", "{xs}[len({xs}) - {n}:]", "{xs}[-{n}:]", False),
        "last_sum": ("the sum of the last {n} items of the list {xs}", "sum({xs}[len({xs}) - {n}:])",
                     "sum({xs}[-{n}:])", True),
    },
    "string": {
        "upper": ("the string {s} in upper case", "{s}.upper()", None, False),
        "lower": ("the string {s} in lower case", "{s}.lower()", None, False),
        "backwards": ("the string {s} written backwards", "{s}[::-1]", None, False),
        "size": ("the number of characters in the string {s}", "len({s})", None, True),
    },
}
# the parameters of each family (the roles of FAMILIES' placeholders) and the names a task may give them
ROLES = {"expr": ("a", "b"), "range": ("a", "b"), "list": ("xs",), "slice": ("xs", "n"), "string": ("s",)}
NAMES = {"a": ("a", "x", "p", "lo", "m"), "b": ("b", "y", "q", "hi", "k"), "xs": ("xs", "items", "nums", "values"),
         "n": ("n", "k", "count"), "s": ("s", "text", "word", "name")}
FAMILY_WEIGHTS = {"expr": 3, "range": 2, "list": 2, "slice": 2, "string": 1}
WORDS = ("cat", "Tree", "moon", "", "Ab", "sun", "Hello", "x", "Code", "rain")
CONSTANTS = ("2", "3", "4", "5", "6", "7", "8", "9")


@dataclass(frozen=True)
class Task:
    """One task: ``family`` / ``variant`` says what the function computes, ``names`` its parameters' names, ``ops``
    ((symbol, operand) pairs: a constant, or a role "a" / "b") what is then done to a numeric result, left to
    right as Python reads ``x + b * 3``."""

    family: str
    variant: str
    names: tuple[str, ...]
    ops: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    @property
    def roles(self) -> dict[str, str]:
        return dict(zip(ROLES[self.family], self.names))

    @property
    def numeric(self) -> bool:
        return FAMILIES[self.family][self.variant][3]

    @property
    def faulty(self) -> bool:
        """Whether the tiny teacher's systematic fault applies to this task."""
        return FAMILIES[self.family][self.variant][2] is not None

    def _operand(self, x: str) -> str:
        return self.roles.get(x, x)

    def instruction(self) -> str:
        phrase = FAMILIES[self.family][self.variant][0].format(**self.roles)
        tail = "".join(f" {OP_WORDS[op]} {self._operand(x)}" for op, x in self.ops)
        return f"Write a Python function f({', '.join(self.names)}) that returns {phrase}{tail}."

    def body(self, fault: bool = False) -> str:
        right, wrong = FAMILIES[self.family][self.variant][1:3]
        base = (wrong if fault and wrong is not None else right).format(**self.roles)
        return base + "".join(f" {op} {self._operand(x)}" for op, x in self.ops)

    def solution(self, fault: bool = False) -> str:
        """The response a teacher writes: one ```python block (``fault``: the family's systematic error)."""
        return f"```python\ndef f({', '.join(self.names)}):\n    return {self.body(fault)}\n```"

    def value(self, args: tuple) -> object:
        """What the right function returns on ``args``, computed from the structure (no code is run)."""
        env = dict(zip(ROLES[self.family], args))
        a, b, xs, n, s = (env.get(k) for k in ("a", "b", "xs", "n", "s"))
        base = {("expr", "first"): lambda: a, ("expr", "second"): lambda: b,
                ("range", "sum"): lambda: sum(range(a, b + 1)), ("range", "count"): lambda: len(range(a, b + 1)),
                ("list", "largest"): lambda: max(xs), ("list", "smallest"): lambda: min(xs),
                ("list", "total"): lambda: sum(xs), ("list", "length"): lambda: len(xs),
                ("list", "reversed"): lambda: xs[::-1], ("list", "sorted"): lambda: sorted(xs),
                ("slice", "first"): lambda: xs[:n], ("slice", "last"): lambda: xs[len(xs) - n:],
                ("slice", "last_sum"): lambda: sum(xs[len(xs) - n:]),
                ("string", "upper"): lambda: s.upper(), ("string", "lower"): lambda: s.lower(),
                ("string", "backwards"): lambda: s[::-1], ("string", "size"): lambda: len(s)}
        terms: list = [base[(self.family, self.variant)]()]
        signs: list[str] = []
        for op, x in self.ops:  # Python's precedence: "x + b * 3" multiplies first
            value = env[x] if x in env else int(x)
            if op == "*":
                terms[-1] = terms[-1] * value
            else:
                signs.append(op)
                terms.append(value)
        total = terms[0]
        for op, value in zip(signs, terms[1:]):
            total = total + value if op == "+" else total - value
        return total

    def test_inputs(self, rng: random.Random) -> list[tuple]:
        """Four inputs, edge cases first: a == b, n == 0 and n == len(xs), a list of one, '' or a one-letter word.
        Where none of them tells the task's :func:`mistaken` variant from it, the last (never an edge case) is
        replaced by the first further input drawn that does (none: the two agree on every input tried)."""
        inputs = self._draw_inputs(rng)
        if any(self.value(args) != mistaken(self, args) for args in inputs):
            return inputs
        for _ in range(MISTAKE_TRIES):
            args = self._draw_inputs(rng)[-1]
            if self.value(args) != mistaken(self, args):
                return inputs[:-1] + [args]
        return inputs

    def _draw_inputs(self, rng: random.Random) -> list[tuple]:
        if self.family in ("expr", "range"):
            a = rng.randint(-3, 6)
            pairs = [(a, a), (rng.randint(-3, 3), rng.randint(4, 9))]
            while len(pairs) < 4:
                x, y = rng.randint(-5, 9), rng.randint(-5, 9)
                pairs.append((min(x, y), max(x, y)) if self.family == "range" else (x, y))
            return pairs
        if self.family == "list":
            return [([rng.randint(0, 9) for _ in range(1 if i == 0 else rng.randint(2, 5))],) for i in range(4)]
        if self.family == "slice":
            lists = [[rng.randint(0, 9) for _ in range(rng.randint(2, 5))] for _ in range(4)]
            ns = [0, len(lists[1]), rng.randint(1, len(lists[2]) - 1), rng.randint(1, len(lists[3]))]
            return [(xs, k) for xs, k in zip(lists, ns)]
        return [(w,) for w in rng.sample(WORDS, 4)]

    def tests(self, seed: str) -> list[str]:
        """The hidden tests: ``assert f(<inputs>) == <expected>`` over :meth:`test_inputs`."""
        rng = random.Random(seed)
        return [f"assert f({', '.join(map(repr, args))}) == {self.value(args)!r}" for args in self.test_inputs(rng)]

    def to_problem(self, seed: str) -> dict:
        """What a record carries: the structure, the entry point and the tests (the verifier's ``problem``)."""
        return {"family": self.family, "variant": self.variant, "names": list(self.names),
                "ops": [list(o) for o in self.ops], "entry_point": "f", "tests": self.tests(seed)}

    @staticmethod
    def from_problem(problem: dict) -> "Task":
        return Task(problem["family"], problem["variant"], tuple(problem["names"]),
                    tuple(tuple(o) for o in problem.get("ops") or ()))


MISTAKE_TRIES = 200  # further inputs drawn to tell a task from its mistaken variant (a few suffice when they differ)


def mistaken(task: Task, args: tuple) -> object:
    """What the task's symmetric mistake returns on ``args``: its two numbers swapped (``f(b, a)``), its list or
    string read from the wrong end (``f(xs[::-1], n)``, ``f(s[::-1])``). A program that makes it is the reference
    with its parameters swapped or its input reversed, so it passes only the tests where the two agree."""
    if task.family in ("expr", "range"):
        return task.value((args[1], args[0]))
    return task.value((args[0][::-1],) + tuple(args[1:]))


def random_names(rng: random.Random, family: str) -> tuple[str, ...]:
    names: list[str] = []
    for role in ROLES[family]:
        names.append(rng.choice([x for x in NAMES[role] if x not in names]))
    return tuple(names)


def random_op(rng: random.Random, family: str) -> tuple[str, str]:
    operands = CONSTANTS + (("a", "b") if family in ("expr", "range") else ())
    return rng.choice(sorted(OP_WORDS)), rng.choice(operands)


def random_task(rng: random.Random, max_ops: int = 2) -> Task:
    family = rng.choices(sorted(FAMILY_WEIGHTS), weights=[FAMILY_WEIGHTS[f] for f in sorted(FAMILY_WEIGHTS)])[0]
    variant = rng.choice(sorted(FAMILIES[family]))
    numeric = FAMILIES[family][variant][3]
    n_ops = rng.randint(1 if family == "expr" else 0, max_ops) if numeric else 0
    return Task(family, variant, random_names(rng, family), tuple(random_op(rng, family) for _ in range(n_ops)))


def draw(n: int, seed: str, prefix: str, exclude: set[str] = frozenset(), max_ops: int = 2) -> list[dict]:
    """``n`` distinct task records (none whose instruction is in ``exclude``): ``{"id", "question", "solution",
    "problem"}``, the solution right."""
    rng = random.Random(seed)
    out, seen = [], set(exclude)
    tries = 0
    while len(out) < n and tries < 50 * n + 1000:
        tries += 1
        task = random_task(rng, max_ops)
        text = task.instruction()
        if text in seen:
            continue
        seen.add(text)
        rid = f"{prefix}-{len(out):05d}"
        out.append({"id": rid, "question": text, "solution": task.solution(), "problem": task.to_problem(rid)})
    if len(out) < n:
        raise ValueError(f"tiny_code: only {len(out)} distinct tasks of {n} asked for (raise [tiny_code] max_ops)")
    return out
