"""``reports/<run>/index.html``: one self-contained page for a run, written at the end of ``rleif run``.

It tells the truth about every stage: ``run.json`` (``run_status.py``) says which stages ran, failed, stopped,
were skipped unchanged or are stale (an earlier stage reran after their figures were recorded); without it, an
executed notebook holding an error counts as failed and a stage with no notebook as not run. Failed stages are
red with their error, stopped ones amber with their reason, stale and missing ones grey, and only current stages
count in the totals — each check once, in the latest current stage that records it (``report_checks.py``).

The page: a contents bar; the **what next** box (``report_next.py``: the first stage that failed or stopped, else
the first check that fails or warns, with its cause and action and a link to its row of docs/troubleshooting.md;
for a healthy run, where to go from the demo); a headline card (what went in, what came out — the SFT accuracy
before and after, PPO's gain over SFT with its 95% interval drawn — the reward's health and the wall time per
stage); per stage its status, its failed requests by cause, its verdicts with their numbers, thresholds and advice
(each check's name linked to its troubleshooting entry; a threshold the preset moved marked with the preset's
reason from ``[reasons]``), the counterfactual probes drawn beside their table (``report_probes.py``), 06's accuracy
per scorer with math-verify's disagreements linked to their file (``report_scorers.py``), its figures
as tables (never raw JSON), its plots (``report_figures.py``: embedded, each linked to the full-size file) and
links to the executed notebook and the stage's log; the config keys the run moved from the kit's defaults; a
``[loop]`` run adds the summary across iterations and a block per iteration. Plain HTML, no script.

    python -m rleif_kit.pipeline.report reports/tiny-cpu      # rewrite the page from what is there
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rleif_kit.core.paths import RunPaths
from rleif_kit.core.records import read_records
from rleif_kit.core.stages import EVAL, STAGES
from rleif_kit.pipeline.report_checks import counted, docs_href, owners, stale_checks
from rleif_kit.pipeline.report_figures import figure, unique
from rleif_kit.pipeline.report_next import Scope, failures_table, what_next
from rleif_kit.pipeline.report_probes import probe_block
from rleif_kit.pipeline.report_scorers import run_paths, scorer_table
from rleif_kit.pipeline.report_parts import (
    TRUSTED,
    config_table,
    esc,
    figures_table,
    headline,
    stage_pill,
    value_cell,
    verdict_pill,
    verdict_table,
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
.problem.failed { border-color: #c62828; background: #ffebe9; } .problem.stale, .problem.notrun { border-color: #8c959f; }
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


def _problem(stage: str, st: dict[str, Any]) -> str:
    status = st.get("status", "")
    if status in TRUSTED:
        return ""
    what = {"failed": "This stage failed", "stopped": "This stage stopped before it was complete",
            "stale": "These figures are stale: they are from an older run", "not run": "Not run",
            "running": "Still marked running: the run was interrupted"}.get(status, status)
    kind = esc(status.replace(" ", ""))
    return f'<div class="problem {kind}"><b>{esc(what)}.</b> {esc(st.get("reason") or "")}</div>'


@dataclass
class _Links:
    """What every stage block links to: the moved config keys, the docs folder, each check's counting stage, the
    run directory (its artifacts, e.g. 06's disagreement file) and the page's folder (links are relative to it)."""
    changed: dict[str, dict[str, Any]]
    docs: str | None
    owner: dict[str, str] = field(default_factory=dict)
    run: RunPaths | None = None
    page: Path = Path(".")


def _stage_block(folder: Path, prefix: str, stage: str, metrics: dict[str, Any], figures: list[Path],
                 st: dict[str, Any], links: _Links) -> str:
    """``prefix``: "" for the run's own folder, "iter-k/" for an iteration's (ids and links)."""
    status = st.get("status", "not run")
    wall = f' <span class="muted">{st["seconds"]:.0f} s</span>' if "seconds" in st else ""
    parts = [f'<section class="stage {esc(status.replace(" ", ""))}" id="{esc(prefix + stage)}" '
             f'data-stage="{esc(stage)}" data-status="{esc(status)}"><h2>{esc(stage)} {stage_pill(status)}{wall}</h2>',
             _problem(stage, st)]
    files = []
    if (folder / f"{stage}.ipynb").exists():
        files.append(f'executed notebook: <a href="{esc(prefix + stage)}.ipynb">{esc(stage)}.ipynb</a>')
    if st.get("log"):  # relative to the run's report folder already, an iteration's too
        files.append(f'log: <a href="{esc(st["log"])}">{esc(st["log"])}</a>')
    if files:
        parts.append(f'<p class="muted">{" · ".join(files)}</p>')
    parts.append(failures_table(metrics.get("failures"), links.docs))
    if status in ("failed", "not run") and not metrics:
        return "\n".join(p for p in parts if p) + "</section>"
    parts.append(verdict_table(metrics, links.changed, links.docs, stage, links.owner, prefix))
    # the probes where they are counted: a chart beside their table (07's matplotlib copy is the same chart)
    probes = probe_block(metrics, links.changed, links.docs) if any(
        links.owner.get(c) == stage for c in links.owner if "_probe_" in c) else ""
    parts.append(probes)
    if stage == EVAL:  # accuracy per scorer; the run's summary.json only when these figures are this run's
        parts.append(scorer_table(metrics, links.run if status in TRUSTED else None, links.page))
    parts.append(figures_table(metrics, ("failures", "probes") if probes else ("failures",)))
    parts.extend(figure(p, prefix + "figures/" + p.name) for p in figures
                 if not (probes and p.stem.endswith("_probes")))
    return "\n".join(p for p in parts if p) + "</section>"


def _folder_blocks(folder: Path, prefix: str, changed: dict[str, dict[str, Any]],
                   docs: str | None, page: Path, output_dir: str | None = None) -> tuple[list[str], dict]:
    """One block per stage, each with its ``figures/NN_*.png``; and the statuses. ``page``: the folder of
    index.html; ``output_dir``: run.json's run directory, relative to it."""
    metrics = read_records(folder / "metrics.json")
    statuses = stage_statuses(folder, prefix)
    links = _Links(changed, docs, owners(metrics, statuses, STAGES), run_paths(page, output_dir, prefix), page)
    pngs = unique(sorted((folder / "figures").glob("*.png")))
    blocks, used = [], set()
    for stage in STAGES:
        mine = [p for p in pngs if p.name[:3] == stage[:2] + "_"]
        used.update(mine)
        blocks.append(_stage_block(folder, prefix, stage, metrics.get(stage, {}), mine, statuses[stage], links))
    rest = [p for p in pngs if p not in used]
    if rest:
        blocks.append("<section><h2>Other figures</h2>" + "".join(figure(p, prefix + "figures/" + p.name)
                                                                   for p in rest) + "</section>")
    return blocks, statuses


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


def _summary_line(metrics: dict[str, Any], statuses: dict[str, dict[str, Any]]) -> str:
    """Stage and check counts: each check once, in the latest current stage that records it (``report_checks``);
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
    body = [f'<nav class="contents">{"".join(nav)}</nav>', f"<h1>RLEIF run · {esc(run.get('run') or report_dir.name)}</h1>",
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
    body.append(f'<section id="config"><h2>Config: what this run moved from the kit\'s defaults</h2>'
                f'{config_table(changes) if run else "<p>No run.json: run through rleif run to see it.</p>"}</section>')
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
