"""06_eval's accuracy per scorer on the report page: a row per model and benchmark that more than one scorer
judges (GSM8k, MATH) — strict (the headline), flexible, compat, math-verify — and how often math-verify and strict
disagree, linked to the run's ``06_eval/math_verify_disagreements.jsonl``.

Read from the run's ``06_eval/summary.json`` (``run.json`` names the run directory, relative to the report folder);
where that is out of reach (the report folder copied alone), from the accuracies ``metrics.json`` records, without
the disagreements.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from rleif_kit.core.paths import RunPaths
from rleif_kit.pipeline.report_parts import esc

SCORERS = (("strict (headline)", "accuracy"), ("flexible", "flexible_accuracy"), ("compat", "compat_accuracy"),
           ("math-verify", "math_verify_accuracy"))  # (column, summary key)


def run_paths(report_dir: Path, output_dir: str | None, prefix: str = "") -> RunPaths | None:
    """The run directory of a report folder (``prefix`` "iter-k/": that iteration's, ``<output_dir>/iter-k``)."""
    if not output_dir:
        return None
    return RunPaths(Path(report_dir) / output_dir / prefix.rstrip("/"))


def _from_metrics(metrics: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """``{model: {benchmark: {summary key: value}}}`` out of 06's recorded ``{key: {model: {benchmark: value}}}``."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for _, key in SCORERS:
        for model, benches in (metrics.get(key) or {}).items():
            for bench, value in (benches or {}).items() if isinstance(benches, dict) else ():
                out.setdefault(model, {}).setdefault(bench, {})[key] = value
    return out


def _read_summary(paths: RunPaths | None) -> dict[str, Any]:
    if paths is None or not paths.eval_summary.is_file():
        return {}
    try:
        return json.loads(paths.eval_summary.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def scorer_table(metrics: dict[str, Any], paths: RunPaths | None, report_dir: Path) -> str:
    """The table, or "" when no benchmark has a second scorer. ``paths``: the run's (None: metrics only)."""
    saved = _read_summary(paths)
    summary = saved.get("summary") if isinstance(saved.get("summary"), dict) else _from_metrics(metrics)
    rows = [(m, b, s) for m, benches in summary.items() if isinstance(benches, dict)
            for b, s in benches.items() if isinstance(s, dict) and any(k in s for _, k in SCORERS[1:])]
    if not rows:
        return ""
    second = saved.get("math_verify") if isinstance(saved.get("math_verify"), dict) else None
    href = None
    if second and paths is not None and paths.math_verify_disagreements.is_file():
        href = Path(os.path.relpath(paths.math_verify_disagreements, report_dir)).as_posix()

    def pct(v: Any) -> str:
        return f"{100 * v:.1f}%" if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"

    def disagreements(s: dict[str, Any]) -> str:
        n = s.get("math_verify_disagreements")
        if n is None:
            return "—"
        return f'<a href="{esc(href)}">{esc(n)}</a>' if href and n else esc(n)

    head = "".join(f"<th>{esc(c)}</th>" for c, _ in SCORERS)
    body = "".join(f"<tr><th>{esc(m)}</th><th>{esc(b)}</th>"
                   + "".join(f'<td class="num">{pct(s.get(k))}</td>' for _, k in SCORERS)
                   + f'<td class="num">{disagreements(s)}</td></tr>' for m, b, s in rows)
    note = ("flexible (GSM8k: the last number), compat (WizardMath's published scorer) and "
            "math-verify are other readings of the same answers")
    if second:
        where = f'<a href="{esc(href)}">{esc(Path(href).name)}</a>' if href else esc(second.get("disagreements", ""))
        note += (f"; the items where math-verify {esc(second.get('version') or '')} and strict disagree, both "
                 f"readings on each line: {where}")
    return (f'<table class="scorers"><caption>Accuracy per scorer</caption><tr><th>model</th><th>benchmark</th>'
            f'{head}<th>disagreements (math-verify vs strict)</th></tr>{body}</table><p class="muted">{note}</p>')
