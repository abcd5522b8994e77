"""The pieces of ``index.html`` (``report.py`` lays them out): status pills, the headline card, verdict tables with
their numbers and thresholds, figure tables instead of raw JSON, the gain-with-interval chart (inline SVG, no
script), and the table of config keys the run moved from the kit's defaults, with the preset's reasons.
"""

from __future__ import annotations

import html
from typing import Any

from rleif_kit.checks.threshold_keys import threshold_keys
from rleif_kit.core.progress import fmt_duration
from rleif_kit.core.verdict import STATUS_COLORS, fmt_number
from rleif_kit.pipeline.report_checks import TRUSTED  # noqa: F401 - report.py's, and the tests'
from rleif_kit.pipeline.report_checks import PAGE, check_anchor, stage_verdicts

# Stage statuses (run_status.py) -> colour and the word shown. Grey says "do not trust these figures".
STAGE_COLOURS = {"ok": STATUS_COLORS["ok"], "skipped": STATUS_COLORS["ok"], "recorded": "#57606a",
                 "running": "#0969da", "stopped": STATUS_COLORS["warn"], "failed": STATUS_COLORS["fail"],
                 "stale": "#8c959f", "not run": "#8c959f"}
STAGE_WORDS = {"ok": "ok", "skipped": "ok · unchanged", "recorded": "recorded", "running": "running (interrupted?)",
               "stopped": "stopped", "failed": "failed", "stale": "stale", "not run": "not run"}
RECORD_ROWS = 10  # a list of records shows its first rows


def esc(value: Any) -> str:
    return html.escape(str(value))


def pill(text: str, colour: str, title: str = "") -> str:
    t = f' title="{esc(title)}"' if title else ""
    return f'<span class="pill" style="background:{colour}"{t}>{esc(text)}</span>'


def stage_pill(status: str) -> str:
    return pill(STAGE_WORDS.get(status, status), STAGE_COLOURS.get(status, "#57606a"))


def verdict_pill(status: str, text: str | None = None) -> str:
    """A verdict's status in its colour; ``text`` (e.g. "42 ok") in place of the word."""
    return pill(status if text is None else text, STATUS_COLORS.get(status, "#57606a"))


def fmt(value: Any) -> str:
    """A figure as text, never as raw JSON: floats to 4 significant digits, a list of numbers inline (an interval),
    other lists comma-separated, a dict as ``key: value; ...``, an empty one (or an empty list) as "none"."""
    if isinstance(value, bool) or value is None:
        return "—" if value is None else str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)) and not value:
        return "none"
    if isinstance(value, (list, tuple)) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return "[" + ", ".join(fmt(v) for v in value) + "]"
    if isinstance(value, (list, tuple)):
        return ", ".join(fmt(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{k}: {fmt(v)}" for k, v in value.items()) or "none"
    return str(value) if value != "" else "none"


def named(values: dict[str, Any], sep: str = "; ") -> str:
    """``{"mean": 0.51234, "band": [0.4, 0.7]}`` -> ``"mean = 0.5123; band = [0.4, 0.7]"``; "" for none."""
    return sep.join(f"{k} = {_figure(v)}" for k, v in values.items()) if isinstance(values, dict) else fmt(values)


def value_cell(value: Any, depth: int = 0) -> str:
    """A dict becomes a nested table (one level of rows per key), never JSON cut mid-word; a list of records a small
    table of its first rows; a list of sentences one per line; an empty dict or list "none"."""
    if isinstance(value, dict) and value and depth < 2:
        if all(isinstance(v, dict) for v in value.values()) and depth == 0:
            cols = sorted({k for v in value.values() for k in v}, key=str)
            if 0 < len(cols) <= 8:
                head = "".join(f"<th>{esc(c)}</th>" for c in cols)
                rows = "".join(f"<tr><th>{esc(k)}</th>" + "".join(f"<td>{esc(fmt(v.get(c)))}</td>" for c in cols)
                               + "</tr>" for k, v in value.items())
                return f'<table class="inner"><tr><th></th>{head}</tr>{rows}</table>'
        rows = "".join(f"<tr><th>{esc(k)}</th><td>{value_cell(v, depth + 1)}</td></tr>" for k, v in value.items())
        return f'<table class="inner">{rows}</table>'
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and depth == 0:
        cols = list(dict.fromkeys(k for v in value[:RECORD_ROWS] for k in v))[:8]
        rows = "".join("<tr>" + "".join(f"<td>{esc(fmt(v.get(c)))}</td>" for c in cols) + "</tr>"
                       for v in value[:RECORD_ROWS])
        more = f'<div class="muted">{len(value) - RECORD_ROWS} more</div>' if len(value) > RECORD_ROWS else ""
        head = "".join(f"<th>{esc(c)}</th>" for c in cols)
        return f'<table class="inner"><tr>{head}</tr>{rows}</table>{more}'
    if isinstance(value, list) and any(isinstance(v, str) and len(v) > 40 for v in value):
        return "<br>".join(esc(fmt(v)) for v in value)
    return f'<span class="num">{esc(fmt(value))}</span>' if isinstance(value, (int, float)) else esc(fmt(value))


def figures_table(metrics: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """The stage's recorded figures, one row each (``skip``: those drawn elsewhere on the page)."""
    rows = [f"<tr><th>{esc(k)}</th><td>{value_cell(v)}</td></tr>" for k, v in metrics.items()
            if k not in ("verdicts", "verdict_details", *skip)]
    return f'<table class="figures">{"".join(rows)}</table>' if rows else ""


def _figure(v: Any) -> str:
    numeric = isinstance(v, float) or (isinstance(v, (list, tuple)) and v and
                                       all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))
    return fmt_number(v) if numeric else fmt(v)


def _numbers(d: Any) -> str:
    if not isinstance(d, dict):
        return esc(fmt(d)) if d else "—"
    return "<br>".join(f"{esc(k)} = {esc(_figure(v))}" for k, v in d.items()) or "—"


def check_cell(check: str, docs: str | None) -> str:
    """The check's name, linked to its troubleshooting entry when the kit's docs are there."""
    name = esc(check)
    return f'<a class="check" href="{esc(docs)}/{PAGE}#{esc(check_anchor(check))}">{name}</a>' if docs else name


def verdict_table(metrics: dict[str, Any], changed: dict[str, dict[str, Any]], docs: str | None = None,
                  stage: str = "", owner: dict[str, str] | None = None, prefix: str = "") -> str:
    """Check | status | numbers | thresholds | advice; ``verdict_details`` when recorded, else the statuses alone.
    A verdict whose thresholds come from a key the run moved from its default is marked with the key and reason;
    one counted in another stage (``owner``: check -> stage, ``report_checks.owners``) says where."""
    details = stage_verdicts(metrics)
    if not details:
        return ""
    rows = []
    for v in details:
        marks = preset_marks(v.get("check", ""), changed)
        mark = "".join(f'<div class="preset" title="{esc(c["reason"] or "no reason given")}">preset: '
                       f'{esc(c["key"])} = {esc(fmt(c["value"]))} (kit default {esc(fmt(c["default"]))})'
                       f'{" — " + esc(c["reason"]) if c["reason"] else ""}</div>' for c in marks)
        where = (owner or {}).get(v["check"], stage if owner is None else None)
        elsewhere = "" if where == stage else (
            f'<div class="muted">counted in <a href="#{esc(prefix + where)}">{esc(where[:2])}</a></div>' if where
            else '<div class="muted">not counted: not a current stage</div>')
        rows.append(f'<tr class="verdict {esc(v.get("status", ""))}{" elsewhere" if elsewhere else ""}">'
                    f'<th>{check_cell(v["check"], docs)}{elsewhere}</th>'
                    f'<td>{verdict_pill(v.get("status", ""))}</td><td>{_numbers(v.get("numbers", {}))}</td>'
                    f'<td>{_numbers(v.get("thresholds", {}))}{mark}</td><td>{esc(v.get("advice") or "")}</td></tr>')
    head = "<tr><th>check</th><th>status</th><th>numbers</th><th>thresholds</th><th>advice</th></tr>"
    return f'<table class="verdicts">{head}{"".join(rows)}</table>'


def preset_marks(check: str, changed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The moved config keys behind ``check``'s thresholds (``checks/threshold_keys.py``), in that table's order."""
    return [changed[k] for k in threshold_keys(check) if k in changed]


def gain_chart(gains: dict[str, dict[str, Any]], min_gain: float | None = None) -> str:
    """PPO − SFT accuracy per benchmark as a dot with its 95% interval, a zero line and the ok line: inline SVG."""
    rows = [(b, g) for b, g in gains.items() if isinstance(g, dict) and isinstance(g.get("gain"), (int, float))]
    if not rows:
        return ""
    lows = [min(g["gain"], *(g.get("ci95") or [g["gain"]])) for _, g in rows] + [0.0, min_gain or 0.0]
    highs = [max(g["gain"], *(g.get("ci95") or [g["gain"]])) for _, g in rows] + [0.0, min_gain or 0.0]
    lo, hi = min(lows), max(highs)
    pad = (hi - lo) * 0.15 or 0.01
    lo, hi = lo - pad, hi + pad
    width, left, right, row_h = 560, 90, 170, 34  # room for the benchmark's name and the figures' text
    x = lambda v: left + (v - lo) / (hi - lo) * (width - left - right)  # noqa: E731 - a scale, read once
    height = row_h * len(rows) + 30
    parts = [f'<svg class="gain" width="{width}" height="{height}" role="img" aria-label="PPO minus SFT accuracy">',
             f'<line x1="{x(0):.1f}" y1="4" x2="{x(0):.1f}" y2="{height - 24}" stroke="#57606a"/>']
    if min_gain is not None:
        parts.append(f'<line x1="{x(min_gain):.1f}" y1="4" x2="{x(min_gain):.1f}" y2="{height - 24}" '
                     f'stroke="{STATUS_COLORS["ok"]}" stroke-dasharray="4 3"/>'
                     f'<text x="{x(min_gain) + 3:.1f}" y="{height - 12}" font-size="11" fill="{STATUS_COLORS["ok"]}">'
                     f'ok at +{min_gain * 100:.1f}</text>')
    for i, (bench, g) in enumerate(rows):
        y = 18 + i * row_h
        ci = g.get("ci95") or [g["gain"], g["gain"]]
        parts.append(f'<text x="4" y="{y + 4}" font-size="12">{esc(bench)}</text>'
                     f'<line x1="{x(ci[0]):.1f}" y1="{y}" x2="{x(ci[1]):.1f}" y2="{y}" stroke="#0969da" '
                     f'stroke-width="3"/><circle cx="{x(g["gain"]):.1f}" cy="{y}" r="5" fill="#0969da"/>'
                     f'<text x="{x(ci[1]) + 6:.1f}" y="{y + 4}" font-size="11">{g["gain"] * 100:+.1f} '
                     f'[{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}] pts</text>')
    parts.append(f'<text x="{x(0) - 4:.1f}" y="{height - 12}" font-size="11" text-anchor="end">0</text></svg>')
    return "".join(parts)


def config_table(changes: list[dict[str, Any]]) -> str:
    if not changes:
        return "<p>Every key at the kit's default (the reference 7B recipe).</p>"
    rows = "".join(f'<tr><th>{esc(c["key"])}{" <em>(--set)</em>" if c.get("override") else ""}</th>'
                   f'<td>{esc(fmt(c["value"]))}</td><td>{esc(fmt(c["default"]))}</td>'
                   f'<td>{esc(c.get("reason") or "")}</td></tr>' for c in changes)
    return ('<table class="config"><tr><th>key</th><th>this run</th><th>kit default (7B recipe)</th>'
            f'<th>why (the preset\'s [reasons])</th></tr>{rows}</table>')


def headline(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]], order: list[str],
             min_gain: float | None, scope: str = "") -> str:
    """What went in, what came out, the reward's health and the wall time per stage, from this run's figures."""
    def trusted(stage: str) -> dict[str, Any]:
        return metrics.get(stage, {}) if statuses.get(stage, {}).get("status") in TRUSTED else {}

    evolve, dedup, sft = trusted(order[1]), trusted(order[2]), trusted(order[3])
    ppo, ev, diag = trusted(order[5]), trusted(order[6]), trusted(order[7])
    went_in = [f"base model <code>{esc(trusted(order[0]).get('base_model', '?'))}</code>"]
    if evolve:
        went_in.append(f"{evolve.get('kept', 0):,} evolved instructions kept ({evolve.get('eliminated', 0):,} "
                       f"eliminated)")
    if dedup:
        went_in.append(f"{dedup.get('kept', 0):,} after dedup ({(dedup.get('removed_share') or 0) * 100:.0f}% "
                       f"removed)")
    if sft:
        went_in.append(f"{sft.get('examples', 0):,} SFT examples, {sft.get('steps', '?')} steps")
    out = []
    if sft.get("accuracy_after") is not None:
        out.append(f"SFT: held-out accuracy {sft.get('accuracy_before', 0) * 100:.1f}% → "
                   f"<b>{sft['accuracy_after'] * 100:.1f}%</b>")
    gains = ev.get("ab") if isinstance(ev.get("ab"), dict) else {}
    for bench, g in gains.items():
        if isinstance(g, dict) and isinstance(g.get("gain"), (int, float)):
            ci = g.get("ci95") or [None, None]
            out.append(f"PPO vs SFT on {esc(bench)}: <b>{g['gain'] * 100:+.1f} points</b> (95% interval "
                       f"{fmt_pts(ci[0])} to {fmt_pts(ci[1])}, n = {g.get('n', '?')})")
    if not gains and ppo.get("ppo_accuracy") is not None:
        out.append(f"PPO vs SFT (05's A/B): {ppo.get('sft_accuracy', 0) * 100:.1f}% → "
                   f"<b>{ppo['ppo_accuracy'] * 100:.1f}%</b> (n = {ppo.get('eval_n', '?')})")
    health = diag.get("verdicts") if isinstance(diag.get("verdicts"), dict) else {}
    if health:
        counts = {s: sum(1 for v in health.values() if v == s) for s in ("ok", "warn", "fail")}
        out.append("reward health (07): " + " ".join(verdict_pill(s, f"{n} {s}") if n else "" for s, n in counts.items()))
    if not out:
        out.append("no result yet: no later stage of this run finished")
    timeline = "".join(
        f'<tr><th><a href="#{esc(s)}">{esc(s)}</a></th><td>{stage_pill(statuses.get(s, {}).get("status", "not run"))}'
        f'</td><td class="num">{esc(fmt_duration(statuses[s]["seconds"])) if "seconds" in statuses.get(s, {}) else "—"}'
        f'</td></tr>' for s in order)
    total = sum(v.get("seconds", 0) for v in statuses.values() if v.get("status") in ("ok", "skipped"))
    title = "Headline" + (f' <span class="muted">· {esc(scope)}</span>' if scope else "")
    return (f'<section id="headline" class="card"><h2>{title}</h2><div class="cols"><div>'
            f'<h3>What went in</h3><ul>{"".join(f"<li>{w}</li>" for w in went_in)}</ul>'
            f'<h3>What came out</h3><ul>{"".join(f"<li>{o}</li>" for o in out)}</ul>{gain_chart(gains, min_gain)}'
            f'</div><div><h3>Stages</h3><table class="timeline">{timeline}</table>'
            f'<p class="muted">wall time of the current stages: {fmt_duration(total)}</p></div></div></section>')


def fmt_pts(v: Any) -> str:
    return f"{v * 100:+.1f}" if isinstance(v, (int, float)) else "?"
