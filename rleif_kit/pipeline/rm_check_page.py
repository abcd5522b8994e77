"""``rleif rm-check``: the command around ``diagnostics/rm_check.py`` and its page, ``rm_check.html`` (the verdicts
with their numbers and advice, the figures, the step metrics and what was not checked), written with the report's
autoescaping templates (``markup.py``) so a text from the data or the model folder reaches the page only as text.

Exit status: 1 when a verdict fails, 0 otherwise; a bad model folder or data file is one line (status 2, ``cli.py``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from rleif_kit.checks.verdicts import format_verdict_table
from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.verdict import fmt_number
from rleif_kit.diagnostics.rm_check import PAGE, model_head, read_check_data, rm_check, save_check
from rleif_kit.pipeline.markup import render
from rleif_kit.pipeline.report_sections import verdict_pill
from rleif_kit.rewards.prm_toolkit import run_world
from rleif_kit.worlds import get_world, world_for

PAGE_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>rm-check: {{ model }}</title>
<style>body{font-family:system-ui,sans-serif;max-width:70rem;margin:2rem auto;padding:0 1rem;color:#1f2328}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #d0d7de;padding:.35rem .5rem;
text-align:left;vertical-align:top;font-size:.9rem}.pill{color:#fff;border-radius:1rem;padding:.1rem .5rem;
font-size:.8rem}img{max-width:100%}.advice{color:#57606a}code{background:#f6f8fa;padding:0 .2rem}</style></head>
<body><h1>Is this reward model good enough?</h1>
<p><b>{{ kind }}</b> <code>{{ model }}</code> ({{ head }} head) on <code>{{ data }}</code>{% if world %}, probes in
the <b>{{ world }}</b> world{% endif %}: {{ summary }}</p>
<table><tr><th>check</th><th>status</th><th>numbers</th><th>what it means, what to do</th></tr>
{% for v, pill, numbers in rows %}<tr><td><code>{{ v.check }}</code></td><td>{{ pill }}</td><td>{{ numbers }}</td>
<td class="advice">{{ v.advice or "ok" }}<br><small>{{ v.source }}</small></td></tr>{% endfor %}</table>
{% if notes %}<h2>Not checked</h2><ul>{% for n in notes %}<li>{{ n }}</li>{% endfor %}</ul>{% endif %}
{% if steps %}<h2>Step metrics (ProcessBench, PRMBench)</h2><p>{{ steps }}</p>{% endif %}
{% for name, src in figures %}<h2>{{ name }}</h2><img src="{{ src }}" alt="{{ name }}">{% endfor %}
</body></html>
"""
FIGURE_TITLES = {"scores": "Scores", "probes": "Counterfactual probes"}


def render_page(result: Any, files: dict[str, Path], out: Path) -> str:
    """The HTML page of an ``RMCheck`` whose figures were written to ``files`` (by name), linked relative to ``out``."""
    counts = {s: sum(v.status == s for v in result.verdicts) for s in ("ok", "warn", "fail")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no check applied"
    rows = [(v, verdict_pill(v.status), "; ".join(f"{k} = {fmt_number(x)}" for k, x in v.numbers.items()))
            for v in result.verdicts]
    steps = result.metrics.get("steps")
    step_line = ""
    if steps:
        pb, rb = steps["at_0.5"]["processbench"], steps["at_0.5"]["prmbench"]
        step_line = (f"{steps['solutions']} solutions ({steps['unscored']} unscored); at 0.5: ProcessBench F1 "
                     f"{fmt_number(pb['f1'])}, PRMBench PRM-Score {fmt_number(rb['prm_score'])}")
    figures = [(FIGURE_TITLES.get(name, name), os.path.relpath(path, out)) for name, path in files.items()
               if name != "json"]
    return str(render(PAGE_TEMPLATE, model=result.model, kind=result.kind, head=result.head, data=result.data,
                      world=result.world, summary=summary, rows=rows, notes=result.notes, steps=step_line,
                      figures=figures))


def rm_check_command(args: Any) -> int:
    """``rleif rm-check`` (``cli.py`` builds ``args``): the checks, their table, ``rm_check.json``, the figures and
    ``rm_check.html`` in ``--out``; 1 when a verdict fails."""
    if args.dry_run:
        head, told = model_head(args.model)
        data = read_check_data(args.data, args.format, args.neutral) if args.data else None
        print(f"{args.model}: {head} head (told by {told}); "
              + (f"{args.data}: {len(data.rows)} rows of {data.shape}" if data else "no --data: the run's gate data"))
        return 0
    cfg = load_config(args.params, args.overrides) if args.params else None
    paths = RunPaths(output_dir=cfg.output_dir, report_dir=Path(cfg.output_dir) / "report") if cfg else None
    name = args.world or (None if cfg else run_world(args.model))
    world = get_world(name) if name else (world_for(cfg) if cfg else None)
    result = rm_check(args.model, args.data, kind=args.kind, world=world, cfg=cfg, paths=paths,
                      aggregate=args.aggregate, batch_size=args.batch_size, max_len=args.max_len,
                      fmt=args.format, neutral=args.neutral)
    print(format_verdict_table(result.verdicts))
    for note in result.notes:
        print(f"not checked: {note}")
    out = Path(args.out)
    files = save_check(result, out)
    (out / PAGE).write_text(render_page(result, files, out), encoding="utf-8")
    verdict = "FAIL: a check failed (exit 1)" if result.failed else "no check failed"
    print(f"{verdict}; {out / PAGE}, {files['json']}")
    return 1 if result.failed else 0
