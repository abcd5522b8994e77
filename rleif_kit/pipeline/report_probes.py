"""The counterfactual probes in the report: one chart — a bar per probe, the share of pairs the reward moved the
right way, in its verdict's colour, with the ok and fail lines — beside a table of their figures.

The probes are verdicts named ``<model>_probe_<edit>`` (``checks/probes.py``): the PPO gate records them in 05
(``05_ppo/gate.json``), 07 records them again on the run's files (its ``verdict_details``, and ``probes`` as
``{check: {moved_right, mean_change, pairs, status}}``). The report draws them in the stage that counts them
(``report_checks``): 07 when it ran, else 05. Inline SVG, like the gain chart: no script, no matplotlib.
"""

from __future__ import annotations

from typing import Any

from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report_checks import stage_verdicts
from rleif_kit.pipeline.report_parts import check_cell, esc, fmt, verdict_pill

MUST = {"down": "down", "same": "stay put"}
DEFAULT_LINES = (0.8, 0.4)  # DiagnosticsConfig's probe_ok and probe_fail, where a record carries no thresholds


def probe_rows(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """The stage's probes: {check, status, moved_right, mean_change, ci95, pairs, direction, ok_at, fail_at}."""
    rows = []
    for v in stage_verdicts(metrics):
        n, t = v.get("numbers") or {}, v.get("thresholds") or {}
        if "_probe_" in v["check"] and isinstance(n.get("moved_right"), (int, float)):
            rows.append({"check": v["check"], "status": v.get("status", ""), "moved_right": n["moved_right"],
                         "mean_change": n.get("mean_change"), "ci95": n.get("ci95"), "pairs": n.get("pairs"),
                         "direction": t.get("direction", ""), "ok_at": t.get("ok_at"),
                         "fail_at": t.get("fail_at_or_below")})
    if not rows and isinstance(metrics.get("probes"), dict):  # 07's summary when no verdict was kept whole
        rows = [{"check": k, "status": p.get("status", ""), "moved_right": p.get("moved_right"),
                 "mean_change": p.get("mean_change"), "ci95": None, "pairs": p.get("pairs"), "direction": "",
                 "ok_at": None, "fail_at": None}
                for k, p in metrics["probes"].items() if isinstance(p, dict) and isinstance(p.get("moved_right"),
                                                                                          (int, float))]
    return rows


def _lines(rows: list[dict[str, Any]], changed: dict[str, dict[str, Any]]) -> tuple[float, float]:
    ok = next((r["ok_at"] for r in rows if isinstance(r["ok_at"], (int, float))), None)
    fail = next((r["fail_at"] for r in rows if isinstance(r["fail_at"], (int, float))), None)
    ok = ok if ok is not None else changed.get("diagnostics.probe_ok", {}).get("value", DEFAULT_LINES[0])
    fail = fail if fail is not None else changed.get("diagnostics.probe_fail", {}).get("value", DEFAULT_LINES[1])
    return float(ok), float(fail)


def probe_chart(rows: list[dict[str, Any]], ok_at: float, fail_at: float) -> str:
    """A bar per probe on a 0–100% axis, the ok and fail lines dashed, each bar's share written beside it."""
    width, left, right, row_h, top = 410, 140, 40, 24, 22  # beside the table on a 1150 px page
    x = lambda v: left + max(0.0, min(1.0, v)) * (width - left - right)  # noqa: E731 - a scale, read once
    height = top + row_h * len(rows) + 34
    parts = [f'<svg class="probes" width="{width}" height="{height}" role="img" aria-label="counterfactual probes: '
             f'share of pairs the reward moved the right way">']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{x(tick):.1f}" y1="{top - 4}" x2="{x(tick):.1f}" y2="{height - 30}" '
                     f'stroke="#d0d7de"/><text x="{x(tick):.1f}" y="{height - 18}" font-size="11" '
                     f'text-anchor="middle">{tick:.0%}</text>')
    for i, r in enumerate(rows):
        y = top + i * row_h
        colour = STATUS_COLORS.get(r["status"], "#57606a")
        parts.append(f'<text x="{left - 6}" y="{y + 15}" font-size="11" text-anchor="end">'
                     f'{esc(r["check"].replace("_probe_", " "))}</text>'
                     f'<rect class="bar" x="{x(0):.1f}" y="{y + 4}" width="{x(r["moved_right"]) - x(0):.1f}" '
                     f'height="{row_h - 8}" fill="{colour}"><title>{esc(r["check"])}: {r["moved_right"]:.0%} '
                     f'({esc(r["status"])})</title></rect>'
                     f'<text x="{x(r["moved_right"]) + 4:.1f}" y="{y + 15}" font-size="11">'
                     f'{r["moved_right"]:.0%}</text>')
    for value, status, label in ((ok_at, "ok", f"ok from {ok_at:.0%}"), (fail_at, "fail",
                                                                           f"fail at {fail_at:.0%} or below")):
        anchor = "start" if status == "ok" else "end"
        parts.append(f'<line class="{status}-line" x1="{x(value):.1f}" y1="{top - 8}" x2="{x(value):.1f}" '
                     f'y2="{height - 30}" stroke="{STATUS_COLORS[status]}" stroke-width="2" stroke-dasharray="5 3"/>'
                     f'<text x="{x(value) + (3 if status == "ok" else -3):.1f}" y="{top - 10}" font-size="11" '
                     f'fill="{STATUS_COLORS[status]}" text-anchor="{anchor}">{esc(label)}</text>')
    parts.append(f'<text x="{width - right}" y="{height - 4}" font-size="11" fill="#57606a" text-anchor="end">'
                 f'share of pairs moved the right way</text></svg>')
    return "".join(parts)


def _signed(value: Any) -> str:
    return f"{value:+.3f}" if isinstance(value, (int, float)) else esc(fmt(value))


def _interval(ci: Any) -> str:
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci):
        return f"{ci[0]:+.3f} to {ci[1]:+.3f}"
    return "—"


def probe_block(metrics: dict[str, Any], changed: dict[str, dict[str, Any]], docs: str | None) -> str:
    """The chart beside the table, or "" when the stage recorded no probe."""
    rows = probe_rows(metrics)
    if not rows:
        return ""
    ok_at, fail_at = _lines(rows, changed)
    body = "".join(
        f'<tr class="probe {esc(r["status"])}"><th>{check_cell(r["check"], docs)}</th>'
        f'<td>{verdict_pill(r["status"])}</td><td class="num">{r["moved_right"]:.0%}</td>'
        f'<td class="num">{_signed(r["mean_change"])}<div class="muted">{_interval(r["ci95"])}</div></td>'
        f'<td class="num">{esc(fmt(r["pairs"]))}</td>'
        f'<td>{esc(MUST.get(r["direction"], r["direction"] or "—"))}</td></tr>' for r in rows)
    table = ('<table class="probes"><tr><th>probe</th><th>status</th><th>moved right</th><th>mean change<div '
             f'class="muted">95% interval</div></th><th>pairs</th><th>must go</th></tr>{body}</table>')
    return (f'<div class="probes-block"><h3>What the reward reads: the counterfactual probes</h3>'
            f'<div class="side">{table}{probe_chart(rows, ok_at, fail_at)}</div></div>')
