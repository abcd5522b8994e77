"""``reports/<run>/index.html``: one self-contained page for a run, written at the end of ``rleif run``.

It tells the truth about every stage: ``run.json`` (``run_status.py``) says which stages ran, failed, stopped,
were skipped unchanged or are stale (an earlier stage reran after their figures were recorded); without it, an
executed notebook holding an error counts as failed and a stage with no notebook as not run. Failed stages are
red with their error, stopped ones amber with their reason, stale and missing ones grey, and only current stages
count in the totals — each check once, in the latest current stage that records it.

This module builds the page and writes it; ``report_sections.py`` renders each stage's section, and holds the
rules every part of the page follows (how a figure is written, where a check links, where it counts). The page,
top to bottom, and this module in the same order:

- a contents bar, the run's name, params and times, and the counts of stages and checks;
- the **what next** box: the one thing to look at first, in this order: a stage that failed, stopped or was
  interrupted (the first in pipeline order, the run's own folder before a loop's later iterations); else the first
  check that fails; else the first that warns. It gives the cause and the action — the verdict's own advice, and
  the likely cause and what to do from the check's row in ``docs/troubleshooting.md`` — and links that row; the
  other problems follow in a line. A healthy run gets where to go from the demo instead;
- a headline card: what went in, what came out — the SFT accuracy before and after, PPO's gain over SFT with its
  95% interval drawn — the reward's health and the wall time per stage;
- a ``[loop]`` run's summary across iterations;
- a section per stage (``report_sections.stage_section``): its status, its failed requests by cause, its verdicts
  with their numbers, thresholds and advice, the counterfactual probes, 06's accuracy per scorer, its figures as
  tables (never raw JSON), its plots, links to the executed notebook and the stage's log;
- the config keys the run moved from the kit's defaults, with the preset's reasons from ``[reasons]``;
- a ``[loop]`` run's block per later iteration.

Plain HTML, no script. A report folder belongs to one run (``core/run_setup.claim_report_folder``, before any
work): no run overwrites another's ``index.html`` and ``run.json``.

    python -m rleif_kit.pipeline.report reports/tiny-cpu      # rewrite the page from what is there
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rleif_kit.core.progress import fmt_duration
from rleif_kit.core.records import read_records
from rleif_kit.core.stages import STAGES
from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report_sections import (
    TRUSTED,
    Links,
    cause_anchor,
    check_anchor,
    counted,
    doc_entry,
    doc_link,
    docs_href,
    esc,
    failures_table,
    figure,
    fmt,
    md_inline,
    named,
    owners,
    run_paths,
    stage_anchor,
    stage_pill,
    stage_section,
    stale_checks,
    unique,
    value_cell,
    verdict_pill,
)
from rleif_kit.pipeline.run_status import RUN_FILE

CSS = """
body { font-family: system-ui, sans-serif; margin: 0 auto 3em; max-width: 1180px; padding: 0 1em; color: #1f2328; }
nav.contents { position: sticky; top: 0; background: #f6f8fa; border-bottom: 1px solid #d0d7de; padding: 0.5em 0.8em;
               font-size: 0.9em; z-index: 1; } nav.contents a { margin-right: 0.9em; white-space: nowrap; }
h1 { margin: 0.6em 0 0.2em; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; margin-top: 1.6em; }
h3 { margin: 0.8em 0 0.3em; font-size: 1em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
td, th { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f6f8fa; font-weight: 600; } table.inner { margin: 0; font-size: 1em; }
table.inner td, table.inner th { padding: 0.1em 0.4em; } .num { font-variant-numeric: tabular-nums; }
.pill { display: inline-block; padding: 0.1em 0.6em; border-radius: 1em; color: #fff; font-size: 0.85em; }
.card { border: 1px solid #d0d7de; border-radius: 8px; padding: 0.2em 1.2em 1em; background: #fff; }
.cols { display: flex; gap: 2em; flex-wrap: wrap; } .cols > div { flex: 1 1 420px; }
.problem { border-left: 6px solid; padding: 0.4em 0.9em; margin: 0.6em 0; background: #f6f8fa; white-space: pre-wrap; }
.problem.failed { border-color: #c62828; background: #ffebe9; }
.problem.stale, .problem.notrun { border-color: #8c959f; }
.problem.stopped { border-color: #f9a825; background: #fff8c5; }
section.stage.failed h2 { color: #c62828; } section.stage.stale, section.stage.notrun { opacity: 0.75; }
section.stage.stopped h2, section.stage.running h2 { color: #9a6700; }
section.next { border: 2px solid; border-left-width: 8px; border-radius: 8px; padding: 0.1em 1.2em 0.6em;
               margin: 1em 0; background: #fff; } section.next h2 { border: 0; margin-top: 0.5em; }
section.next.failed, section.next.fail { background: #ffebe9; } section.next.stopped, section.next.running,
section.next.warn { background: #fff8c5; } section.next.ok { background: #dafbe1; } .lead { font-size: 1.05em; }
table.next th { width: 9em; background: transparent; } table.next { background: #ffffffb0; }
table.failures td.example { font-family: ui-monospace, monospace; font-size: 0.85em; word-break: break-word; }
table.failures caption, table.scorers caption { text-align: left; font-weight: 600; padding: 0.2em 0; }
tr.verdict.elsewhere td, tr.verdict.elsewhere th { opacity: 0.7; }
table.verdicts td:nth-child(3), table.verdicts td:nth-child(4) { min-width: 12em; }
.side { display: flex; gap: 1.5em; flex-wrap: wrap; align-items: flex-start; } svg.probes { flex: none; }
.preset { color: #8250df; font-size: 0.85em; margin-top: 0.2em; }
tr.verdict.fail th { color: #c62828; } tr.verdict.warn th { color: #9a6700; }
figure { display: inline-block; margin: 0.5em; vertical-align: top; max-width: 100%; }
figure img { max-width: 540px; width: 100%; border: 1px solid #d0d7de; }
figure.wide { display: block; margin: 0.5em 0; } figure.wide img { max-width: 100%; width: auto; }
figcaption { font-size: 0.85em; color: #57606a; }
.muted { color: #57606a; font-size: 0.9em; }
"""


# ------------------------------------------------------------------ which stages ran, and the counts under the title


def notebook_error(notebook: Path) -> str | None:
    """``ename: evalue`` of the first error output an executed notebook holds (papermill keeps it), else None."""
    try:
        nb = json.loads(notebook.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    for i, cell in enumerate(nb.get("cells", [])):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i}: {out.get('ename', 'Error')}: {out.get('evalue', '')}".strip()
    return None


def stage_statuses(folder: Path, prefix: str = "") -> dict[str, dict[str, Any]]:
    """stage -> {status, reason, seconds?, log?} from ``run.json``, or inferred from what the folder holds."""
    recorded = read_records(folder / RUN_FILE).get("stages", {}) if prefix == "" else \
        {k[len(prefix):]: v for k, v in read_records(folder.parent / RUN_FILE).get("stages", {}).items()
         if k.startswith(prefix)}
    metrics = read_records(folder / "metrics.json")
    out = {}
    for stage in STAGES:
        notebook = folder / f"{stage}.ipynb"
        if stage in recorded:
            out[stage] = dict(recorded[stage])
        elif notebook.exists():
            error = notebook_error(notebook)
            out[stage] = ({"status": "failed", "reason": error} if error else
                          {"status": "recorded", "reason": "no run.json entry: run outside rleif run, or before it "
                                                           "kept statuses"})
        else:
            out[stage] = {"status": "not run", "reason": "no executed notebook in this report folder"}
        if out[stage]["status"] in TRUSTED and stage not in metrics and not notebook.exists():
            out[stage] = {"status": "not run", "reason": "its executed notebook and figures are missing"}
    return out


def _summary_line(metrics: dict[str, Any], statuses: dict[str, dict[str, Any]]) -> str:
    """Stage and check counts: each check once, in the latest current stage that records it (``report_sections``);
    checks only stale stages record are counted apart."""
    by_status: dict[str, int] = {}
    for st in statuses.values():
        by_status[st["status"]] = by_status.get(st["status"], 0) + 1
    verdicts = [v.get("status") for _, v in counted(metrics, statuses, STAGES)]
    stale = stale_checks(metrics, statuses, STAGES)
    stages = ", ".join(f"{n} {s}" for s, n in by_status.items())
    counts = " ".join(verdict_pill(s, f"{verdicts.count(s)} {s}") for s in ("ok", "warn", "fail") if verdicts.count(s))
    extra = f" ({len(stale)} more on stale stages, not counted)" if stale else ""
    return (f'<p>Stages: {esc(stages)}. Checks, each counted once (in the latest current stage that records it): '
            f'{counts or "none"}{esc(extra)}.</p>')


# ------------------------------------------------------------------ the what-next box

PROBLEM_STAGES = ("failed", "stopped", "running")
CAUSE_COLUMNS = ("likely cause", "warn / fail means", "a warn or fail means", "what it means", "what happened")
NEXT_STEPS = (("your-own-7b-run.md", "Your own 7B run", "from weights and data to the report, in the order you "
                                                          "will do it"),
              ("wizardcoder.md", "The WizardCoder arm", "Code Evol-Instruct and RLEIF on the execution reward"),
              ("../notebooks", "The notebooks", "one per stage: open them in JupyterLab to see what each stage made"),
              ("results.md", "Results", "what the kit measured on the demo presets, to compare this run with"),
              ("loop.md", "The iterative loop", "evolve harder instructions with the trained models, again"))


@dataclass
class Scope:
    """One folder of the run: "" for its own, "iter-k/" for a loop's later iteration."""
    prefix: str
    metrics: dict[str, dict[str, Any]]
    statuses: dict[str, dict[str, Any]]


def rerun_command(run: dict[str, Any]) -> str:
    sets = "".join(f" --set {o}" for o in run.get("overrides", []))
    return f"rleif run {run.get('params') or 'PARAMS.toml'}{sets}"


def check_link(docs: str | None, check: str) -> str:
    return doc_link(docs, check_anchor(check), esc(check))


def _rows(pairs: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in pairs if v)
    return f'<table class="next">{body}</table>' if body else ""


def _stage_problem(scope: Scope, stage: str, st: dict[str, Any], run: dict[str, Any], docs: str | None) -> str:
    status, reason = st.get("status", ""), st.get("reason") or "no reason recorded"
    failures = scope.metrics.get(stage, {}).get("failures")
    fails = [v for v in scope.metrics.get(stage, {}).get("verdict_details") or []
             if isinstance(v, dict) and v.get("status") == "fail"]
    rerun = f"rerun <code>{esc(rerun_command(run))}</code>: the stages already done are skipped (unchanged) and " \
            f"{esc(stage)} starts again from what it saved"
    anchor, cause, todo = stage_anchor(status, reason), "", rerun
    if isinstance(failures, dict) and failures.get("causes") and failures.get("status") == "stopped" \
            and status == "stopped":  # stopped by its failed requests, not failed for another reason beside a few
        top = next(iter(failures["causes"]))
        anchor = cause_anchor(top)
        cause = f"{esc(failures.get('failed'))} of {esc(failures.get('total'))} requests failed, mostly " \
                f"<b>{esc(top)}</b> (the table below has one example of each cause)"
        fix = doc_entry(anchor).get("what to do")
        todo = (md_inline(fix) + "; then " if fix else "") + rerun + " (a rerun retries exactly the failed items)"
    elif "sigterm" in reason.lower() or "terminated" in reason.lower() or status == "running":
        cause = ("the run was terminated before this stage completed (a signal: a scheduler's time limit, "
                 "<code>kill</code>, Ctrl-C, a closed session), not by anything the stage measured")
    elif status == "failed":
        cause = "the error above, from the executed notebook; " + (
            "the checks that failed: " + ", ".join(check_link(docs, v["check"]) for v in fails) if fails else
            "the notebook and the log hold its traceback")
        todo = ("read the traceback in the stage's executed notebook or log (linked in its section), fix it, then "
                + rerun)
    words = {"failed": "failed", "stopped": "stopped", "running": "was interrupted"}[status]
    where = esc(scope.prefix + stage)
    return (f'<p class="lead">{stage_pill(status)} <a href="#{where}"><b>{where}</b></a> {words}: {esc(reason)}</p>'
            + _rows([("cause", cause), ("what to do", todo)])
            + failures_table(failures, docs)
            + f'<p>{doc_link(docs, anchor, "the troubleshooting entry: a stage that stopped or failed")}</p>')


def _verdict_problem(prefix: str, stage: str, v: dict[str, Any], docs: str | None) -> str:
    anchor = check_anchor(v["check"])
    entry = doc_entry(anchor)
    cause = next((entry[c] for c in CAUSE_COLUMNS if entry.get(c)), "")
    measured = named(v.get("numbers") or {})
    held = named(v.get("thresholds") or {})
    return (f'<p class="lead">{verdict_pill(v["status"])} <b>{check_link(docs, v["check"])}</b> in '
            f'<a href="#{esc(prefix + stage)}">{esc(prefix + stage)}</a></p>'
            + _rows([("measured", esc(measured) + (f' <span class="muted">(held to {esc(held)})</span>' if held
                                                   else "") if measured else ""),
                     ("the check says", esc(v.get("advice") or "")), ("likely cause", md_inline(cause)),
                     ("what to do", md_inline(entry.get("what to do", "")) or
                      "open its troubleshooting entry")])
            + f'<p>{doc_link(docs, anchor, "the troubleshooting entry: " + esc(v["check"]))}</p>')


def _healthy(scopes: list[Scope], run: dict[str, Any], docs: str | None) -> str:
    missing = [s for s, st in scopes[0].statuses.items() if st.get("status") in ("not run", "stale")]
    lead = (f'<p class="lead">{verdict_pill("ok")} <b>No check failed or warned.</b> '
            + (f'{len(missing)} stages have not run or are stale ({esc(", ".join(missing))}): '
               f'<code>{esc(rerun_command(run))}</code> runs them.' if missing else
               "Every stage is current. Where to go from the demo:") + "</p>")
    if not docs:
        return lead
    items = "".join(f'<li><a href="{esc(posixpath.normpath(posixpath.join(docs, path)))}">{esc(title)}</a>: '
                    f'{esc(what)}</li>' for path, title, what in NEXT_STEPS)
    return lead + f"<ul>{items}</ul>"


def _failed_requests(scopes: list[Scope], order: list[str], skip: tuple[str, str] | None) -> list[str]:
    """"NN: F of N requests failed (mostly cause)" for each stage that recorded failures, ``skip`` (the box's) aside."""
    out = []
    for sc in scopes:
        for s in order:
            failures = sc.metrics.get(s, {}).get("failures")
            if (sc.prefix, s) != skip and isinstance(failures, dict) and failures.get("failed"):
                top = next(iter(failures.get("causes") or {"unknown": 0}))
                out.append(f'<a href="#{esc(sc.prefix + s)}">{esc(sc.prefix + s)}</a>: {esc(failures["failed"])} of '
                           f'{esc(failures.get("total", "?"))} requests failed (mostly {esc(top)})')
    return out


def what_next(scopes: list[Scope], run: dict[str, Any], order: list[str], docs: str | None) -> str:
    """The box: the first problem (with the others listed after it), or where to go from a healthy run."""
    stages = [(sc, s, sc.statuses[s]) for sc in scopes for s in order
              if sc.statuses.get(s, {}).get("status") in PROBLEM_STAGES]
    verdicts = [(sc.prefix, s, v) for sc in scopes for s, v in counted(sc.metrics, sc.statuses, order)]
    bad = [x for status in ("fail", "warn") for x in verdicts if x[2].get("status") == status]
    if stages:
        kind, body = stages[0][2]["status"], _stage_problem(*stages[0], run, docs)
    elif bad:
        kind, body = bad[0][2]["status"], _verdict_problem(*bad[0], docs)
    else:
        kind, body = "ok", _healthy(scopes, run, docs)
    others = [f'<a href="#{esc(sc.prefix + s)}">{esc(sc.prefix + s)}</a> {esc(st["status"])}'
              for sc, s, st in stages[1:]]
    others += [f'{check_link(docs, v["check"])} {esc(v["status"])} ({esc(p + s)})'
               for p, s, v in (bad if stages else bad[1:])]
    others += _failed_requests(scopes, order, (stages[0][0].prefix, stages[0][1]) if stages else None)
    tail = f"; and {len(others) - 8} more" if len(others) > 8 else ""
    more = f'<p class="muted">Also: {"; ".join(others[:8])}{tail}.</p>' if others else ""
    colour = STATUS_COLORS.get({"failed": "fail", "running": "warn", "stopped": "warn"}.get(kind, kind), "#57606a")
    return (f'<section id="next" class="next {esc(kind)}" style="border-color:{colour}" data-kind="{esc(kind)}">'
            f"<h2>What next</h2>{body}{more}</section>")


# ------------------------------------------------------------------ the headline card


def fmt_pts(v: Any) -> str:
    return f"{v * 100:+.1f}" if isinstance(v, (int, float)) else "?"


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
        out.append("reward health (07): "
                   + " ".join(verdict_pill(s, f"{n} {s}") if n else "" for s, n in counts.items()))
    if not out:
        out.append("no result yet: no later stage of this run finished")
    timeline = "".join(
        f'<tr><th><a href="#{esc(s)}">{esc(s)}</a></th><td>{stage_pill(statuses.get(s, {}).get("status", "not run"))}'
        f'</td><td class="num">'
        f'{esc(fmt_duration(statuses[s]["seconds"])) if "seconds" in statuses.get(s, {}) else "—"}'
        f'</td></tr>' for s in order)
    total = sum(v.get("seconds", 0) for v in statuses.values() if v.get("status") in ("ok", "skipped"))
    title = "Headline" + (f' <span class="muted">· {esc(scope)}</span>' if scope else "")
    return (f'<section id="headline" class="card"><h2>{title}</h2><div class="cols"><div>'
            f'<h3>What went in</h3><ul>{"".join(f"<li>{w}</li>" for w in went_in)}</ul>'
            f'<h3>What came out</h3><ul>{"".join(f"<li>{o}</li>" for o in out)}</ul>{gain_chart(gains, min_gain)}'
            f'</div><div><h3>Stages</h3><table class="timeline">{timeline}</table>'
            f'<p class="muted">wall time of the current stages: {fmt_duration(total)}</p></div></div></section>')


# ------------------------------------------------------------------ the loop, the stages, the config


def _loop_table(summary: dict[str, Any]) -> str:
    rows = summary.get("iterations", [])
    if not rows:
        return ""
    cols = [c for c in rows[0] if c not in ("output_dir", "report_dir")]
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{value_cell(r.get(c))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<section id="loop"><h2>The loop: {len(rows)} iterations</h2><table><tr>{head}</tr>{body}</table></section>'


def _iteration_folders(report_dir: Path) -> list[Path]:
    found = [p for p in report_dir.glob("iter-*") if re.fullmatch(r"iter-\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def _folder_blocks(folder: Path, prefix: str, changed: dict[str, dict[str, Any]],
                   docs: str | None, page: Path, output_dir: str | None = None) -> tuple[list[str], dict]:
    """One block per stage, each with its ``figures/NN_*.png``; and the statuses. ``page``: the folder of
    index.html; ``output_dir``: run.json's run directory, relative to it."""
    metrics = read_records(folder / "metrics.json")
    statuses = stage_statuses(folder, prefix)
    links = Links(changed, docs, owners(metrics, statuses, STAGES), run_paths(page, output_dir, prefix), page)
    pngs = unique(sorted((folder / "figures").glob("*.png")))
    blocks, used = [], set()
    for stage in STAGES:
        mine = [p for p in pngs if p.name[:3] == stage[:2] + "_"]
        used.update(mine)
        blocks.append(stage_section(folder, prefix, stage, metrics.get(stage, {}), mine, statuses[stage], links))
    rest = [p for p in pngs if p not in used]
    if rest:
        blocks.append("<section><h2>Other figures</h2>" + "".join(figure(p, prefix + "figures/" + p.name)
                                                                   for p in rest) + "</section>")
    return blocks, statuses


def config_table(changes: list[dict[str, Any]], notes: list[str] = ()) -> str:
    """The keys the run moved, with the preset's reasons; ``notes``: one line per [reasons] entry that does not
    apply to this run (run.json's ``reason_notes``), so a reason copied with a preset is never read as this run's."""
    shown = "".join(f'<p class="muted">{esc(n)}</p>' for n in notes)
    if not changes:
        return "<p>Every key at the kit's default (the reference 7B recipe).</p>" + shown
    rows = "".join(f'<tr><th>{esc(c["key"])}{" <em>(--set)</em>" if c.get("override") else ""}</th>'
                   f'<td>{esc(fmt(c["value"]))}</td><td>{esc(fmt(c["default"]))}</td>'
                   f'<td>{esc(c.get("reason") or "")}</td></tr>' for c in changes)
    return ('<table class="config"><tr><th>key</th><th>this run</th><th>kit default (7B recipe)</th>'
            f'<th>why (the preset\'s [reasons])</th></tr>{rows}</table>{shown}')


def write_report(report_dir: str | Path) -> Path:
    """Write ``<report_dir>/index.html`` from the run's run.json, metrics.json, figures and loop summary."""
    report_dir = Path(report_dir)
    run = read_records(report_dir / RUN_FILE)
    metrics = read_records(report_dir / "metrics.json")
    changes = run.get("config_changes", [])
    changed = {c["key"]: c for c in changes}
    min_gain = changed.get("diagnostics.ab_min_gain", {}).get("value", 0.03)
    docs = docs_href(report_dir)
    blocks, statuses = _folder_blocks(report_dir, "", changed, docs, report_dir, run.get("output_dir"))
    iterations = _iteration_folders(report_dir)
    latest_metrics, latest = dict(metrics), dict(statuses)  # a loop's headline: each stage's latest iteration
    for folder in iterations:
        theirs, their_metrics = stage_statuses(folder, f"{folder.name}/"), read_records(folder / "metrics.json")
        for stage, st in theirs.items():
            if st["status"] != "not run":
                latest[stage], latest_metrics[stage] = st, their_metrics.get(stage, {})
    nav = ['<a href="#next">What next</a>', '<a href="#headline">Headline</a>'] + [
        f'<a href="#{esc(s)}">{esc(s[:2])} {stage_pill(statuses[s]["status"])}</a>' for s in STAGES]
    nav += ['<a href="#config">Config</a>'] + [f'<a href="#{f.name}">{esc(f.name)}</a>' for f in iterations]
    where = " ".join(x for x in [f"<code>{esc(run['params'])}</code>" if run.get("params") else "",
                                 " ".join(f"<code>--set {esc(o)}</code>" for o in run.get("overrides", [])),
                                 f"· started {esc(run['started'])}" if run.get("started") else "",
                                 f"· finished {esc(run['finished'])}" if run.get("finished") else ""] if x)
    body = [f'<nav class="contents">{"".join(nav)}</nav>',
            f"<h1>RLEIF run · {esc(run.get('run') or report_dir.name)}</h1>",
            f'<p class="muted">{where}</p>' if where else "", _summary_line(metrics, statuses),
            what_next([Scope("", metrics, statuses)] + [
                Scope(f"{f.name}/", read_records(f / "metrics.json"), stage_statuses(f, f"{f.name}/"))
                for f in iterations], run, list(STAGES), docs),
            headline(latest_metrics, latest, list(STAGES), min_gain,
                     f"each stage's latest iteration (of {len(iterations) + 1})" if iterations else "")]
    summary_path = report_dir / "loop_summary.json"
    if summary_path.exists():
        body.append(_loop_table(json.loads(summary_path.read_text(encoding="utf-8"))))
    if iterations:
        body.append("<h2>Iteration 1</h2>")
    body.extend(blocks)
    table = config_table(changes, run.get("reason_notes", [])) if run else \
        "<p>No run.json: run through rleif run to see it.</p>"
    body.append(f'<section id="config"><h2>Config: what this run moved from the kit\'s defaults</h2>{table}</section>')
    for folder in iterations:
        body.append(f'<h2 id="{folder.name}">Iteration {folder.name.split("-")[1]}</h2>')
        body.extend(_folder_blocks(folder, f"{folder.name}/", changed, docs, report_dir, run.get("output_dir"))[0])
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>RLEIF run {esc(run.get('run') or report_dir.name)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(b for b in body if b) + "\n</body></html>\n")
    out = report_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out


if __name__ == "__main__":
    import sys

    print(write_report(sys.argv[1] if len(sys.argv) > 1 else "."))
