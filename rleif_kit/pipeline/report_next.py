"""The report's "what next" box, at the top of the page, and a stage's table of failed requests by cause.

The box names the one thing to look at first, in this order: a stage that failed, stopped or was interrupted (the
first in pipeline order, the run's own folder before a loop's later iterations); else the first check that fails;
else the first that warns — each counted where ``report_checks`` counts it. It gives the cause and the action —
the verdict's own advice, and the likely cause and what to do from the check's row in ``docs/troubleshooting.md``
— and links that row. A healthy run gets where to go from the demo instead.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any

from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report_checks import (
    PAGE,
    cause_anchor,
    check_anchor,
    counted,
    doc_entry,
    md_inline,
    stage_anchor,
)
from rleif_kit.pipeline.report_parts import esc, fmt, named, stage_pill, verdict_pill

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


def doc_link(docs: str | None, anchor: str, text: str) -> str:
    return f'<a href="{esc(docs)}/{PAGE}#{esc(anchor)}">{text}</a>' if docs else text


def check_link(docs: str | None, check: str) -> str:
    return doc_link(docs, check_anchor(check), esc(check))


def failures_table(failures: Any, docs: str | None) -> str:
    """``{"total", "failed", "causes": {cause: {"count", "example"}}, "parts"?}``: a caption and a row per cause."""
    if not isinstance(failures, dict) or not failures.get("failed"):
        return ""
    parts = [p for p in failures.get("parts") or [] if isinstance(p, dict) and p.get("failed")]
    detail = " (" + "; ".join(f"{p.get('failed')} of {p.get('total')} {p.get('what', '')}".strip() for p in parts) + ")"
    rows = "".join(f'<tr><th>{doc_link(docs, cause_anchor(c), esc(c))}</th><td class="num">{esc(fmt(e.get("count")))}'
                   f'</td><td class="example">{esc(e.get("example") or "none")}</td></tr>'
                   for c, e in (failures.get("causes") or {}).items() if isinstance(e, dict))
    return (f'<table class="failures"><caption>{esc(failures["failed"])} of {esc(failures.get("total", "?"))} '
            f'requests failed{esc(detail) if parts else ""}, by cause</caption>'
            f'<tr><th>cause</th><th>count</th><th>one example</th></tr>{rows}</table>')


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

