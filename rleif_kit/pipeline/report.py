"""``reports/<run>/index.html``: one self-contained page for a run, written at the end of ``rleif run``.

Per stage, in pipeline order: its verdicts (ok green, warn amber, fail red), its recorded figures from
``metrics.json`` and its plots (``figures/NN_*.png``, embedded as base64 so the page can be mailed or
copied alone), and a link to the executed notebook. A ``[loop]`` run adds the summary across
iterations and one such block per iteration (``iter-k/``). Plain HTML and CSS, no script.

    python -m rleif_kit.pipeline.report reports/tiny-cpu      # rewrite the page from what is there
"""

from __future__ import annotations

import base64
import html
import json
import re
from pathlib import Path
from typing import Any

from rleif_kit.core.records import read_records
from rleif_kit.core.stages import STAGES

VERDICT_COLOURS = {"ok": "#1a7f37", "warn": "#b58100", "fail": "#cf222e"}
CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #1f2328; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #d0d7de; padding-bottom: 0.2em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.92em; }
td, th { border: 1px solid #d0d7de; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
.verdict { display: inline-block; padding: 0.15em 0.6em; margin: 0.15em; border-radius: 1em; color: #fff;
           font-size: 0.9em; background: #6e7781; }
""" + "".join(f".verdict.{k} {{ background: {c}; }}\n" for k, c in VERDICT_COLOURS.items()) + """
figure { display: inline-block; margin: 0.5em; vertical-align: top; }
figure img { max-width: 500px; border: 1px solid #d0d7de; }
figcaption { font-size: 0.85em; color: #57606a; }
.muted { color: #57606a; font-size: 0.9em; }
"""


def _status(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("status", value.get("verdict", ""))
    return str(value).lower()


def _verdicts(metrics: dict[str, Any]) -> list[tuple[str, str]]:
    """(check, status) from a stage's ``verdicts``: {check: status}, {check: {status, ...}} or a list."""
    raw = metrics.get("verdicts")
    if isinstance(raw, dict):
        return [(str(k), _status(v)) for k, v in raw.items()]
    if isinstance(raw, list):
        return [(str(v.get("check", v.get("name", i))), _status(v)) for i, v in enumerate(raw) if isinstance(v, dict)]
    return []


def _value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    text = v if isinstance(v, str) else json.dumps(v, default=str)
    return text if len(text) <= 240 else text[:237] + "..."


def _badge(check: str, status: str) -> str:
    cls = status if status in VERDICT_COLOURS else "other"
    label = f"{html.escape(check)}: {html.escape(status)}"
    return f'<span class="verdict {cls}" title="{html.escape(status)}">{label}</span>'


def _figure(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return (f'<figure><img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{html.escape(path.name)}</figcaption></figure>")


def _stage_block(folder: Path, prefix: str, stage: str, metrics: dict[str, Any], figures: list[Path]) -> str:
    """``prefix``: "" for the run's own folder, "iter-k/" for an iteration's (ids and links)."""
    parts = [f'<section class="stage" id="{html.escape(prefix + stage)}" data-stage="{html.escape(stage)}">'
             f"<h2>{html.escape(stage)}</h2>"]
    notebook = folder / f"{stage}.ipynb"
    if notebook.exists():
        parts.append(f'<p class="muted">executed notebook: <a href="{html.escape(prefix + notebook.name)}">'
                     f"{html.escape(notebook.name)}</a></p>")
    verdicts = _verdicts(metrics)
    if verdicts:
        parts.append('<p class="verdicts">' + "".join(_badge(c, s) for c, s in verdicts) + "</p>")
    rows = [f"<tr><th>{html.escape(k)}</th><td>{html.escape(_value(v))}</td></tr>"
            for k, v in metrics.items() if k != "verdicts"]
    if rows:
        parts.append("<table>" + "".join(rows) + "</table>")
    parts.extend(_figure(p) for p in figures)
    return "\n".join(parts) + "</section>"


def _folder_blocks(folder: Path, prefix: str = "") -> list[str]:
    """One block per stage recorded in ``folder/metrics.json``, each with its ``figures/NN_*.png``."""
    metrics = read_records(folder / "metrics.json")
    order = {s: i for i, s in enumerate(STAGES)}
    stages = sorted(metrics, key=lambda s: (order.get(s, len(order)), s))
    pngs = sorted((folder / "figures").glob("*.png"))
    blocks, used = [], set()
    for stage in stages:
        mine = [p for p in pngs if p.name[:3] == stage[:2] + "_"]
        used.update(mine)
        blocks.append(_stage_block(folder, prefix, stage, metrics[stage], mine))
    rest = [p for p in pngs if p not in used]
    if rest:
        blocks.append("<section><h2>Other figures</h2>" + "".join(_figure(p) for p in rest) + "</section>")
    return blocks


def _loop_table(summary: dict[str, Any]) -> str:
    rows = summary.get("iterations", [])
    if not rows:
        return ""
    cols = [c for c in rows[0] if c not in ("output_dir", "report_dir")]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_value(r.get(c)))}</td>" for c in cols) + "</tr>" for r in rows)
    return f'<section id="loop"><h2>The loop: {len(rows)} iterations</h2><table><tr>{head}</tr>{body}</table></section>'


def _iteration_folders(report_dir: Path) -> list[Path]:
    found = [p for p in report_dir.glob("iter-*") if re.fullmatch(r"iter-\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def write_report(report_dir: str | Path) -> Path:
    """Write ``<report_dir>/index.html`` from the run's metrics.json, figures and loop summary."""
    report_dir = Path(report_dir)
    metrics = read_records(report_dir / "metrics.json")
    all_verdicts = [s for m in metrics.values() if isinstance(m, dict) for _, s in _verdicts(m)]
    counts = ", ".join(f"{all_verdicts.count(s)} {s}" for s in VERDICT_COLOURS)
    body = [f"<h1>RLEIF run · {html.escape(report_dir.name)}</h1>",
            f'<p class="muted">{len(metrics)} stage(s) recorded; verdicts: {counts}. '
            f"Figures from <code>metrics.json</code>, plots from <code>figures/</code>.</p>"]
    summary_path = report_dir / "loop_summary.json"
    if summary_path.exists():
        body.append(_loop_table(json.loads(summary_path.read_text(encoding="utf-8"))))
    iterations = _iteration_folders(report_dir)
    if iterations:
        body.append("<h2>Iteration 1</h2>")
    body.extend(_folder_blocks(report_dir))
    for folder in iterations:
        body.append(f'<h2 id="{folder.name}">Iteration {folder.name.split("-")[1]}</h2>')
        body.extend(_folder_blocks(folder, prefix=f"{folder.name}/"))
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>RLEIF run {html.escape(report_dir.name)}</title><style>{CSS}</style></head>\n<body>\n"
            + "\n".join(body) + "\n</body></html>\n")
    out = report_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out


if __name__ == "__main__":
    import sys

    print(write_report(sys.argv[1] if len(sys.argv) > 1 else "."))
