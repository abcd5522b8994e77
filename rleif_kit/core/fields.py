"""The field helpers of the config sections: ``opt``/``required`` (a default, its help text, its range check) and
the range checks themselves, each returning None when a value is fine, else what was expected."""

from __future__ import annotations

import math
import re
from dataclasses import field
from typing import Any, Callable

from rleif_kit.core.reward_formula import FormulaError, parse_reward_formula


def opt(default: Any, help: str, check: Callable[[Any], str | None] | None = None, **kw):
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata={"help": help, "check": check})
    return field(default=default, metadata={"help": help, "check": check}, **kw)


def required(help: str, check=None):
    return field(metadata={"help": help, "check": check})


def ranged(text: str, ok: Callable[[Any], bool]) -> Callable[[Any], str | None]:
    """A range check: None when ``ok(v)``, else "a value <text>". The check keeps ``text`` as ``range``, so a
    value of the wrong type (``rounds = 'two'``) is told the range too: "must be an integer from 1 to 1,000"."""
    def check(v):
        return None if ok(v) else f"a value {text}"
    check.range = text
    return check


positive = ranged("> 0", lambda v: v > 0)
non_negative = ranged(">= 0", lambda v: v >= 0)
unit = ranged("in [0, 1]", lambda v: 0 <= v <= 1)


def at_least(n):
    return ranged(f">= {n}", lambda v: v >= n)


def between(low, high):
    return ranged(f"from {low:,} to {high:,}", lambda v: low <= v <= high)


MAX_TOKENS = between(1, 1_000_000)  # no model writes a million tokens in one reply


def steps_or_epochs(v):
    return None if v == -1 or v > 0 else "-1 (use epochs) or a number of steps > 0"


steps_or_epochs.range = "(-1 = use epochs, or > 0)"


def one_of(*choices):
    return lambda v: None if v in choices else "one of " + ", ".join(repr(c) for c in choices)


def subset_of(*choices):
    def check(values):
        bad = [v for v in values if v not in choices]
        return None if not bad else f"a list drawn from {', '.join(choices)} (unknown: {', '.join(bad)})"
    return check


def nonempty(v):
    return None if v.strip() else "a non-empty string"


def formula(v):
    try:
        parse_reward_formula(v)
    except FormulaError as e:
        return f"an expression over rI, rA, rV and rF ({e})"
    return None


def world_name(v):
    """A registered world's name or a module path (``rleif_kit.worlds`` checks which when a stage asks it)."""
    return None if re.fullmatch(r"[A-Za-z_][\w.]*", v) else "a world's name ('math', 'arith', 'code') or a module path"


RENAMED_BACKENDS = {"arith": "'world' (renamed: the world's own programmatic evolver; [base] world = 'arith' names "
                                      "the world)"}


def evol_backend(v):
    return RENAMED_BACKENDS.get(v) or one_of("openai", "hf", "world")(v)


def prompts_root(v):
    if v.rstrip("/").endswith("prompts/evol"):
        return (f"the prompts root, e.g. {v.rstrip('/')[:-len('/evol')]!r} (the templates moved to "
                "<root>/<world>/evol/<operator>.txt)")
    return nonempty(v)


def name_weights(values):
    """``["in_breadth=1", "complicate_input=0.5"]``: names with non-negative weights (the world checks the names)."""
    for v in values:
        name, sep, weight = v.partition("=")
        try:
            ok = bool(sep and name.strip()) and float(weight) >= 0 and math.isfinite(float(weight))
        except ValueError:
            ok = False
        if not ok:
            return f"'operator=weight' entries with a weight >= 0 (got {v!r})"
    return None


in_unit = ranged("in (0, 1]", lambda v: 0 < v <= 1)


def names(values):
    """A list of plain names (benchmarks: the worlds say which exist, ``rleif_kit.worlds.world_for``)."""
    bad = [v for v in values if not re.fullmatch(r"[A-Za-z_][\w.-]*", v)]
    return f"a list of names (got {', '.join(map(repr, bad))})" if bad else None
