"""SFT vs PPO by task family: where a held-out gain comes from, and what each model's failures are.

One figure per benchmark hides where it moved: on the tiny code preset the whole gain can be one family of tasks
while another stays at zero and a third kind of failure grows. So 06 breaks every benchmark's per-item rows
(``06_eval/<model>/<benchmark>.jsonl``) down by the family each row carries (``row["family"]``: the world's task
family, ``World.family``, else the benchmark's own category, MATH's subject; none for GSM8k and HumanEval) and,
where the world classifies its failures (``World.failure_class``: code's "syntax error", "wrong value", ...), counts
them per model. Plain rows in, plain dicts out: the notebook shows them as a table, ``record("families", ...)``
keeps them for the report.

    [{"family": "range", "n": {"sft": 79, "ppo": 79}, "right": {"sft": 0, "ppo": 76},
      "failures": {"sft": {"wrong value": 79}, "ppo": {"wrong value": 3}}}, ..., {"family": "all", ...}]
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

ALL = "all"  # the row of every item of the benchmark, last
MODEL_ORDER = ("base", "sft", "ppo")  # columns before and after (metrics.json keeps its keys sorted: ppo, sft)


def family_breakdown(rows: Mapping[str, Sequence[Mapping[str, Any]]],
                     failure_class: Callable[[Mapping[str, Any]], str | None] | None = None) -> list[dict[str, Any]]:
    """``rows``: model -> its rows of one benchmark. One entry per family (sorted by name; rows without one go
    under "other" when some have one), then "all": ``n`` and ``right`` per model, and ``failures`` per model
    (class -> count, most common first) where ``failure_class`` names a class for a wrong row."""
    named = any(r.get("family") for got in rows.values() for r in got)
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for model, got in rows.items():
        for r in got:
            key = (r.get("family") or "other") if named else ALL
            groups.setdefault(key, {m: [] for m in rows})[model].append(r)
    order = sorted(k for k in groups if k != ALL)
    if named:
        groups[ALL] = {m: list(got) for m, got in rows.items()}
    return [_entry(f, groups[f], failure_class) for f in order + ([ALL] if ALL in groups else [])]


def _entry(family: str, by_model: Mapping[str, Sequence[Mapping[str, Any]]],
           failure_class: Callable[[Mapping[str, Any]], str | None] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"family": family, "n": {m: len(got) for m, got in by_model.items()},
                           "right": {m: sum(bool(r.get("correct")) for r in got) for m, got in by_model.items()}}
    if failure_class is not None:
        failures = {}
        for model, got in by_model.items():
            counts: dict[str, int] = {}
            for r in got:
                kind = None if r.get("correct") else failure_class(r)
                if kind:
                    counts[kind] = counts.get(kind, 0) + 1
            failures[model] = dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        if any(failures.values()):
            out["failures"] = failures
    return out


def share(entry: Mapping[str, Any], model: str) -> float | None:
    """The share of ``model``'s rows of a breakdown entry it got right (None: it has none there)."""
    n = (entry.get("n") or {}).get(model)
    return (entry.get("right") or {}).get(model, 0) / n if n else None


def has_families(families: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a benchmark's breakdown has more than its "all" row (GSM8k and HumanEval have none)."""
    return any(e.get("family") != ALL for e in families)


def family_rows(families: Mapping[str, Sequence[Mapping[str, Any]]], score: str = "accuracy") -> list[dict[str, Any]]:
    """The breakdown of every benchmark as display rows: benchmark, family, each model's ``right/n (share)`` under
    "<model> <score>", PPO's change over SFT in points where both ran, and each model's failures ("wrong value 40 ·
    syntax error 3") where the world classifies them. A benchmark with no family shows its "all" row alone."""
    out = []
    for bench, entries in families.items():
        for e in entries:
            models = sorted(e.get("n") or {}, key=lambda m: MODEL_ORDER.index(m) if m in MODEL_ORDER else 9)
            row: dict[str, Any] = {"benchmark": bench, "family": e["family"]}
            for m in models:
                s = share(e, m)
                row[f"{m} {score}"] = f"{e['right'][m]}/{e['n'][m]} ({100 * s:.1f}%)" if s is not None else "—"
            if "sft" in models and "ppo" in models and share(e, "sft") is not None and share(e, "ppo") is not None:
                row["change (points)"] = round(100 * (share(e, "ppo") - share(e, "sft")), 1)
            for m in models if e.get("failures") else ():
                kinds = sorted(e["failures"][m].items(), key=lambda kv: (-kv[1], kv[0]))  # most common first
                row[f"{m} failures"] = " · ".join(f"{k} {v}" for k, v in kinds) or "none"
            out.append(row)
    return out
