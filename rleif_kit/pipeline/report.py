"""``reports/<run>/index.html``: one self-contained page for a run, written at the end of ``rleif run``.

It tells the truth about every stage: ``run.json`` (``run_status.py``) says which stages ran, failed, stopped,
were skipped unchanged or are stale (an earlier stage reran after their figures were recorded); without it, an
executed notebook holding an error counts as failed and a stage with no notebook as not run. Failed stages are
red with their error, stopped ones amber with their reason, stale and missing ones grey, and only current stages
count in the totals — each check once, in the latest current stage that records it.

This module builds the page and writes it; ``report_sections.py`` renders each stage's section, and holds the
rules every part of the page follows (how a figure is written, where a check links, where it counts). The page,
top to bottom, and this module in the same order:

- a contents bar, the run's name, its world and reward formula with what computes each term (``worlds/words.py``,
  from ``run.json``'s config keys: a code run reads ``r = rI · rV`` and pass@1, never the math world's words),
  params and times, and the counts of stages and checks;
- the **results** at a glance: 06's score (the world's: accuracy, pass@1) per model and benchmark, and per task
  family where a benchmark has families, with PPO's change over SFT in points;
- the **what next** box: the one thing to look at first, in this order: a stage that failed, stopped or was
  interrupted (the first in pipeline order, the run's own folder before a loop's later iterations); else the first
  check that fails; else the first that warns. It gives the cause and the action — the verdict's own advice, and
  the likely cause and what to do from the check's row in ``docs/troubleshooting.md`` — and links that row; the
  other problems follow in a line. A healthy run gets where to go from the demo instead (its own arm first: a code
  run's WizardCoder page);
- a headline card: what went in, what came out — the SFT accuracy before and after, PPO's gain over SFT with its
  95% interval drawn — the reward's health and the wall time per stage;
- a ``[loop]`` run's summary across iterations;
- a section per stage (``report_sections.stage_section``): its status, its failed requests by cause, its verdicts
  with their numbers, thresholds and advice, the counterfactual probes, 06's accuracy per scorer, its figures as
  tables (never raw JSON), its plots, links to the executed notebook and the stage's log;
- the config keys the run moved from the kit's defaults, with the preset's reasons from ``[reasons]``;
- a ``[loop]`` run's block per later iteration.

Plain HTML, no script. Every part is a Jinja2 template with autoescaping (``markup.py``; the page's frame and its
style sheet are ``templates/report.html.j2``): what a model, a user or a file wrote — a completion, a judge's reply,
a stage's error, a config value, a check's advice, the run's name — reaches the page as text, never as markup.
A report folder belongs to one run (``core/run_setup.claim_report_folder``, before any work): no run overwrites
another's ``index.html`` and ``run.json``.

    python -m rleif_kit.pipeline.report reports/tiny-cpu      # rewrite the page from what is there
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rleif_kit.core.config import SECTIONS
from rleif_kit.core.progress import fmt_duration
from rleif_kit.core.records import read_records
from rleif_kit.core.stages import EVAL, STAGES
from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.markup import join, render, render_file
from rleif_kit.pipeline.report_sections import (
    TRUSTED,
    Links,
    cause_anchor,
    check_anchor,
    counted,
    doc_entry,
    doc_link,
    docs_href,
    failures_table,
    figure,
    fmt,
    md_inline,
    named,
    owners,
    results_table,
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
from rleif_kit.worlds import UnknownWorld, get_world
from rleif_kit.worlds.words import RunWords, run_words

# ------------------------------------------------------------------ the run's words


def _default(section: str, key: str) -> Any:
    return SECTIONS[section].__dataclass_fields__[key].default


def report_words(run: dict[str, Any]) -> RunWords | None:
    """The run's words (``worlds/words.py``: its world, reward formula, task noun, score) from ``run.json``'s
    config keys moved from the kit's defaults; None without run.json or for a world this kit cannot load (the
    page then says what every run says)."""
    if not run:
        return None
    changed = {c["key"]: c["value"] for c in run.get("config_changes", []) if isinstance(c, dict) and "key" in c}

    def value(section: str, key: str) -> Any:
        return changed.get(f"{section}.{key}", _default(section, key))

    cfg = SimpleNamespace(ppo=SimpleNamespace(reward_formula=value("ppo", "reward_formula")),
                          reward_model=SimpleNamespace(answer_reward=value("reward_model", "answer_reward")),
                          evol_instruct=SimpleNamespace(backend=value("evol_instruct", "backend")))
    try:
        return run_words(cfg, get_world(value("base", "world")))
    except (UnknownWorld, ImportError, ValueError):
        return None


def world_line(words: RunWords | None) -> str:
    """Under the title: the run's world and the reward PPO was trained on, each term with what computes it."""
    if words is None:
        return ""
    return render('<p class="world">World <b>{{ w.world }}</b> — {{ w.about }}. Reward <code>{{ w.shown }}</code>: '
                  "{% for t, source in terms %}{% if not loop.first %}; {% endif %}<b>{{ t }}</b> {{ source }}"
                  "{% endfor %}. Scored by {{ w.score }} on held-out {{ w.tasks }}.</p>", w=words,
                  terms=[(t, md_inline(words.sources[t])) for t in words.terms])


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
    counts = join((verdict_pill(s, f"{verdicts.count(s)} {s}") for s in ("ok", "warn", "fail") if verdicts.count(s)),
                  " ")
    extra = f" ({len(stale)} more on stale stages, not counted)" if stale else ""
    return render("<p>Stages: {{ stages }}. Checks, each counted once (in the latest current stage that records it): "
                  "{{ counts or 'none' }}{{ extra }}.</p>", stages=stages, counts=counts, extra=extra)


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
    return doc_link(docs, check_anchor(check), check)


def _rows(pairs: list[tuple[str, str]]) -> str:
    """The box's table: a row per (header, cell) with something in it; a cell is text, or markup the kit built."""
    shown = [(k, v) for k, v in pairs if v]
    return render('<table class="next">{% for k, v in rows %}<tr><th>{{ k }}</th><td>{{ v }}</td></tr>{% endfor %}'
                  "</table>", rows=shown) if shown else ""


def _stage_problem(scope: Scope, stage: str, st: dict[str, Any], run: dict[str, Any], docs: str | None) -> str:
    status, reason = st.get("status", ""), st.get("reason") or "no reason recorded"
    failures = scope.metrics.get(stage, {}).get("failures")
    fails = [v for v in scope.metrics.get(stage, {}).get("verdict_details") or []
             if isinstance(v, dict) and v.get("status") == "fail"]
    rerun = render("rerun <code>{{ command }}</code>: the stages already done are skipped (unchanged) and "
                   "{{ stage }} starts again from what it saved", command=rerun_command(run), stage=stage)
    anchor, cause, todo = stage_anchor(status, reason), "", rerun
    if isinstance(failures, dict) and failures.get("causes") and failures.get("status") == "stopped" \
            and status == "stopped":  # stopped by its failed requests, not failed for another reason beside a few
        top = next(iter(failures["causes"]))
        anchor = cause_anchor(top)
        cause = render("{{ failed }} of {{ total }} requests failed, mostly <b>{{ top }}</b> (the table below has one "
                       "example of each cause)", failed=failures.get("failed"), total=failures.get("total"), top=top)
        fix = doc_entry(anchor).get("what to do")
        todo = render("{% if fix %}{{ fix }}; then {% endif %}{{ rerun }} (a rerun retries exactly the failed items)",
                      fix=md_inline(fix) if fix else "", rerun=rerun)
    elif "sigterm" in reason.lower() or "terminated" in reason.lower() or status == "running":
        cause = render("the run was terminated before this stage completed (a signal: a scheduler's time limit, "
                       "<code>kill</code>, Ctrl-C, a closed session), not by anything the stage measured")
    elif status == "failed":
        cause = render("the error above, from the executed notebook; {% if fails %}the checks that failed: {{ fails }}"
                       "{% else %}the notebook and the log hold its traceback{% endif %}",
                       fails=join((check_link(docs, v["check"]) for v in fails), ", "))
        todo = render("read the traceback in the stage's executed notebook or log (linked in its section), fix it, "
                      "then {{ rerun }}", rerun=rerun)
    words = {"failed": "failed", "stopped": "stopped", "running": "was interrupted"}[status]
    return render('<p class="lead">{{ pill }} <a href="#{{ where }}"><b>{{ where }}</b></a> {{ words }}: {{ reason }}'
                  "</p>{{ rows }}{{ failures }}<p>{{ link }}</p>", pill=stage_pill(status),
                  where=scope.prefix + stage, words=words, reason=reason,
                  rows=_rows([("cause", cause), ("what to do", todo)]), failures=failures_table(failures, docs),
                  link=doc_link(docs, anchor, "the troubleshooting entry: a stage that stopped or failed"))


def _verdict_problem(prefix: str, stage: str, v: dict[str, Any], docs: str | None) -> str:
    anchor = check_anchor(v["check"])
    entry = doc_entry(anchor)
    cause = next((entry[c] for c in CAUSE_COLUMNS if entry.get(c)), "")
    measured = named(v.get("numbers") or {})
    held = named(v.get("thresholds") or {})
    shown = render('{{ measured }}{% if held %} <span class="muted">(held to {{ held }})</span>{% endif %}',
                   measured=measured, held=held) if measured else ""
    return render('<p class="lead">{{ pill }} <b>{{ check }}</b> in <a href="#{{ where }}">{{ where }}</a></p>'
                  "{{ rows }}<p>{{ link }}</p>", pill=verdict_pill(v["status"]), check=check_link(docs, v["check"]),
                  where=prefix + stage,
                  rows=_rows([("measured", shown), ("the check says", v.get("advice") or ""),
                              ("likely cause", md_inline(cause)),
                              ("what to do", md_inline(entry.get("what to do", "")) or
                               "open its troubleshooting entry")]),
                  link=doc_link(docs, anchor, "the troubleshooting entry: " + v["check"]))


def next_steps(words: RunWords | None) -> tuple[tuple[str, str, str], ...]:
    """Where to go from the demo, the run's own arm first: a code run's WizardCoder page before the 7B math run."""
    if words is not None and words.code_language:
        return tuple(sorted(NEXT_STEPS, key=lambda step: step[0] != "wizardcoder.md"))
    return NEXT_STEPS


def _healthy(scopes: list[Scope], run: dict[str, Any], docs: str | None, words: RunWords | None = None) -> str:
    missing = [s for s, st in scopes[0].statuses.items() if st.get("status") in ("not run", "stale")]
    return render('<p class="lead">{{ pill }} <b>No check failed or warned.</b> {% if missing %}{{ missing | length }} '
                  "stages have not run or are stale ({{ missing | join(', ') }}): <code>{{ command }}</code> runs them."
                  "{% else %}Every stage is current. Where to go from the demo:{% endif %}</p>"
                  '{% if steps %}<ul>{% for href, title, what in steps %}<li><a href="{{ href }}">{{ title }}</a>: '
                  "{{ what }}</li>{% endfor %}</ul>{% endif %}", pill=verdict_pill("ok"), missing=missing,
                  command=rerun_command(run),
                  steps=[(posixpath.normpath(posixpath.join(docs, path)), title, what)
                         for path, title, what in next_steps(words)] if docs else [])


def _failed_requests(scopes: list[Scope], order: list[str], skip: tuple[str, str] | None) -> list[str]:
    """"NN: F of N requests failed (mostly cause)" for each stage that recorded failures, ``skip`` (the box's) aside."""
    out = []
    for sc in scopes:
        for s in order:
            failures = sc.metrics.get(s, {}).get("failures")
            if (sc.prefix, s) != skip and isinstance(failures, dict) and failures.get("failed"):
                top = next(iter(failures.get("causes") or {"unknown": 0}))
                out.append(render('<a href="#{{ where }}">{{ where }}</a>: {{ failed }} of {{ total }} requests failed '
                                  "(mostly {{ top }})", where=sc.prefix + s, failed=failures["failed"],
                                  total=failures.get("total", "?"), top=top))
    return out


def what_next(scopes: list[Scope], run: dict[str, Any], order: list[str], docs: str | None,
              words: RunWords | None = None) -> str:
    """The box: the first problem (with the others listed after it), or where to go from a healthy run."""
    stages = [(sc, s, sc.statuses[s]) for sc in scopes for s in order
              if sc.statuses.get(s, {}).get("status") in PROBLEM_STAGES]
    verdicts = [(sc.prefix, s, v) for sc in scopes for s, v in counted(sc.metrics, sc.statuses, order)]
    # a model the run's reward does not read (a PRM beside r = rI * rV) is listed after the checks of what it trains on
    bad = [x for unused in (False, True) for status in ("fail", "warn") for x in verdicts
           if x[2].get("status") == status and bool((x[2].get("thresholds") or {}).get("not_in_reward")) == unused]
    if stages:
        kind, body = stages[0][2]["status"], _stage_problem(*stages[0], run, docs)
    elif bad:
        kind, body = bad[0][2]["status"], _verdict_problem(*bad[0], docs)
    else:
        kind, body = "ok", _healthy(scopes, run, docs, words)
    others = [render('<a href="#{{ where }}">{{ where }}</a> {{ status }}', where=sc.prefix + s, status=st["status"])
              for sc, s, st in stages[1:]]
    others += [render("{{ check }} {{ status }} ({{ where }})", check=check_link(docs, v["check"]), status=v["status"],
                      where=p + s) for p, s, v in (bad if stages else bad[1:])]
    others += _failed_requests(scopes, order, (stages[0][0].prefix, stages[0][1]) if stages else None)
    colour = STATUS_COLORS.get({"failed": "fail", "running": "warn", "stopped": "warn"}.get(kind, kind), "#57606a")
    return render('<section id="next" class="next {{ kind }}" style="border-color:{{ colour }}" data-kind="{{ kind }}">'
                  "<h2>What next</h2>{{ body }}{% if others %}<p class=\"muted\">Also: {{ shown }}"
                  "{% if others | length > 8 %}; and {{ others | length - 8 }} more{% endif %}.</p>{% endif %}"
                  "</section>", kind=kind, colour=colour, body=body, others=others, shown=join(others[:8], "; "))


# ------------------------------------------------------------------ the headline card


def fmt_pts(v: Any) -> str:
    return f"{v * 100:+.1f}" if isinstance(v, (int, float)) else "?"


def gain_chart(gains: dict[str, dict[str, Any]], min_gain: float | None = None, score: str = "accuracy") -> str:
    """PPO − SFT ``score`` (the world's: accuracy, pass@1) per benchmark as a dot with its 95% interval, a zero line
    and the ok line: inline SVG."""
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
    dots = []
    for i, (bench, g) in enumerate(rows):
        ci = g.get("ci95") or [g["gain"], g["gain"]]
        dots.append({"bench": bench, "y": 18 + i * row_h, "lo": f"{x(ci[0]):.1f}", "hi": f"{x(ci[1]):.1f}",
                     "dot": f"{x(g['gain']):.1f}", "text_x": f"{x(ci[1]) + 6:.1f}",
                     "text": f"{g['gain'] * 100:+.1f} [{ci[0] * 100:+.1f}, {ci[1] * 100:+.1f}] pts"})
    return render(
        '<svg class="gain" width="{{ width }}" height="{{ height }}" role="img" aria-label="PPO minus SFT {{ score }}">'
        '<line x1="{{ zero }}" y1="4" x2="{{ zero }}" y2="{{ height - 24 }}" stroke="#57606a"/>'
        '{% if ok %}<line x1="{{ ok.x }}" y1="4" x2="{{ ok.x }}" y2="{{ height - 24 }}" stroke="{{ green }}" '
        'stroke-dasharray="4 3"/><text x="{{ ok.text_x }}" y="{{ height - 12 }}" font-size="11" fill="{{ green }}">'
        "ok at +{{ ok.text }}</text>{% endif %}"
        '{% for d in dots %}<text x="4" y="{{ d.y + 4 }}" font-size="12">{{ d.bench }}</text>'
        '<line x1="{{ d.lo }}" y1="{{ d.y }}" x2="{{ d.hi }}" y2="{{ d.y }}" stroke="#0969da" stroke-width="3"/>'
        '<circle cx="{{ d.dot }}" cy="{{ d.y }}" r="5" fill="#0969da"/>'
        '<text x="{{ d.text_x }}" y="{{ d.y + 4 }}" font-size="11">{{ d.text }}</text>{% endfor %}'
        '<text x="{{ zero_text }}" y="{{ height - 12 }}" font-size="11" text-anchor="end">0</text></svg>',
        width=width, height=height, score=score, zero=f"{x(0):.1f}", zero_text=f"{x(0) - 4:.1f}",
        green=STATUS_COLORS["ok"], dots=dots,
        ok={"x": f"{x(min_gain):.1f}", "text_x": f"{x(min_gain) + 3:.1f}", "text": f"{min_gain * 100:.1f}"}
        if min_gain is not None else None)


def headline(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]], order: list[str],
             min_gain: float | None, scope: str = "", words: RunWords | None = None) -> str:
    """What went in, what came out, the reward's health and the wall time per stage, from this run's figures, named
    in the run's words (``words``: its score, a code run's pass@1; a run without them reads "accuracy")."""
    score = words.score if words else "accuracy"
    def trusted(stage: str) -> dict[str, Any]:
        return metrics.get(stage, {}) if statuses.get(stage, {}).get("status") in TRUSTED else {}

    evolve, dedup, sft = trusted(order[1]), trusted(order[2]), trusted(order[3])
    ppo, ev, diag = trusted(order[5]), trusted(order[6]), trusted(order[7])
    went_in = [render("base model <code>{{ model }}</code>", model=trusted(order[0]).get("base_model", "?"))]
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
        out.append(render("SFT: held-out {{ score }} {{ before }}% → <b>{{ after }}%</b>", score=score,
                          before=f"{sft.get('accuracy_before', 0) * 100:.1f}",
                          after=f"{sft['accuracy_after'] * 100:.1f}"))
    gains = ev.get("ab") if isinstance(ev.get("ab"), dict) else {}
    for bench, g in gains.items():
        if isinstance(g, dict) and isinstance(g.get("gain"), (int, float)):
            ci = g.get("ci95") or [None, None]
            out.append(render("PPO vs SFT on {{ bench }}: <b>{{ gain }} points</b> (95% interval {{ lo }} to {{ hi }}, "
                              "n = {{ n }})", bench=bench, gain=f"{g['gain'] * 100:+.1f}", lo=fmt_pts(ci[0]),
                              hi=fmt_pts(ci[1]), n=g.get("n", "?")))
    if not gains and ppo.get("ppo_accuracy") is not None:
        out.append(render("PPO vs SFT (05's A/B): {{ sft }}% → <b>{{ ppo }}%</b> (n = {{ n }})",
                          sft=f"{ppo.get('sft_accuracy', 0) * 100:.1f}", ppo=f"{ppo['ppo_accuracy'] * 100:.1f}",
                          n=ppo.get("eval_n", "?")))
    health = diag.get("verdicts") if isinstance(diag.get("verdicts"), dict) else {}
    if health:
        counts = {s: sum(1 for v in health.values() if v == s) for s in ("ok", "warn", "fail")}
        out.append(render("reward health (07): {{ pills }}",
                          pills=join((verdict_pill(s, f"{n} {s}") if n else "" for s, n in counts.items()), " ")))
    if not out:
        out.append("no result yet: no later stage of this run finished")
    timeline = [(s, stage_pill(statuses.get(s, {}).get("status", "not run")),
                 fmt_duration(statuses[s]["seconds"]) if "seconds" in statuses.get(s, {}) else "—") for s in order]
    total = sum(v.get("seconds", 0) for v in statuses.values() if v.get("status") in ("ok", "skipped"))
    return render(
        '<section id="headline" class="card"><h2>Headline{% if scope %} <span class="muted">· {{ scope }}</span>'
        '{% endif %}</h2><div class="cols"><div><h3>What went in</h3><ul>{% for w in went_in %}<li>{{ w }}</li>'
        "{% endfor %}</ul><h3>What came out</h3><ul>{% for o in out %}<li>{{ o }}</li>{% endfor %}</ul>{{ chart }}"
        '</div><div><h3>Stages</h3><table class="timeline">{% for s, pill, wall in timeline %}<tr><th>'
        '<a href="#{{ s }}">{{ s }}</a></th><td>{{ pill }}</td><td class="num">{{ wall }}</td></tr>{% endfor %}'
        '</table><p class="muted">wall time of the current stages: {{ total }}</p></div></div></section>',
        scope=scope, went_in=went_in, out=out, chart=gain_chart(gains, min_gain, score), timeline=timeline,
        total=fmt_duration(total))


def results_section(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]],
                    words: RunWords | None) -> str:
    """The one-glance results at the top: 06's score per model, benchmark and task family (its latest current
    figures); "" when 06 has none this run can trust."""
    if statuses.get(EVAL, {}).get("status") not in TRUSTED:
        return ""
    table = results_table(metrics.get(EVAL, {}), words.score if words else "accuracy")
    return render('<section id="results"><h2>Results</h2>{{ table }}<p class="muted">From <a href="#{{ stage }}">'
                  "{{ stage }}</a>; the change is PPO minus SFT in points.</p></section>", table=table,
                  stage=EVAL) if table else ""


# ------------------------------------------------------------------ the loop, the stages, the config


def _loop_table(summary: dict[str, Any]) -> str:
    rows = summary.get("iterations", [])
    if not rows:
        return ""
    cols = [c for c in rows[0] if c not in ("output_dir", "report_dir")]
    return render('<section id="loop"><h2>The loop: {{ rows | length }} iterations</h2><table><tr>{% for c in cols %}'
                  "<th>{{ c }}</th>{% endfor %}</tr>{% for cells in rows %}<tr>{% for cell in cells %}<td>{{ cell }}"
                  "</td>{% endfor %}</tr>{% endfor %}</table></section>", cols=cols,
                  rows=[[value_cell(r.get(c)) for c in cols] for r in rows])


def _iteration_folders(report_dir: Path) -> list[Path]:
    found = [p for p in report_dir.glob("iter-*") if re.fullmatch(r"iter-\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def _folder_blocks(folder: Path, prefix: str, changed: dict[str, dict[str, Any]], docs: str | None, page: Path,
                   output_dir: str | None = None, words: RunWords | None = None) -> tuple[list[str], dict]:
    """One block per stage, each with its ``figures/NN_*.png``; and the statuses. ``page``: the folder of
    index.html; ``output_dir``: run.json's run directory, relative to it."""
    metrics = read_records(folder / "metrics.json")
    statuses = stage_statuses(folder, prefix)
    links = Links(changed, docs, owners(metrics, statuses, STAGES), run_paths(page, output_dir, prefix), page,
                  words)
    pngs = unique(sorted((folder / "figures").glob("*.png")))
    blocks, used = [], set()
    for stage in STAGES:
        mine = [p for p in pngs if p.name[:3] == stage[:2] + "_"]
        used.update(mine)
        blocks.append(stage_section(folder, prefix, stage, metrics.get(stage, {}), mine, statuses[stage], links))
    rest = [p for p in pngs if p not in used]
    if rest:
        blocks.append(render("<section><h2>Other figures</h2>{{ figures }}</section>",
                             figures=join(figure(p, prefix + "figures/" + p.name) for p in rest)))
    return blocks, statuses


def config_table(changes: list[dict[str, Any]], notes: list[str] = ()) -> str:
    """The keys the run moved, with the preset's reasons; ``notes``: one line per [reasons] entry that does not
    apply to this run (run.json's ``reason_notes``), so a reason copied with a preset is never read as this run's."""
    rows = [{"key": c["key"], "override": c.get("override"), "value": fmt(c["value"]), "default": fmt(c["default"]),
             "reason": c.get("reason") or ""} for c in changes]
    return render("{% if not rows %}<p>Every key at the kit's default (the reference 7B recipe).</p>{% else %}"
                  '<table class="config"><tr><th>key</th><th>this run</th><th>kit default (7B recipe)</th>'
                  "<th>why (the preset's [reasons])</th></tr>"
                  "{% for c in rows %}<tr><th>{{ c.key }}{% if c.override %} <em>(--set)</em>{% endif %}</th>"
                  "<td>{{ c.value }}</td><td>{{ c.default }}</td>"
                  "<td>{{ c.reason }}</td></tr>{% endfor %}</table>{% endif %}"
                  '{% for n in notes %}<p class="muted">{{ n }}</p>{% endfor %}', rows=rows, notes=list(notes))


def write_report(report_dir: str | Path) -> Path:
    """Write ``<report_dir>/index.html`` from the run's run.json, metrics.json, figures and loop summary."""
    report_dir = Path(report_dir)
    run = read_records(report_dir / RUN_FILE)
    metrics = read_records(report_dir / "metrics.json")
    changes = run.get("config_changes", [])
    changed = {c["key"]: c for c in changes}
    min_gain = changed.get("diagnostics.ab_min_gain", {}).get("value", 0.03)
    docs = docs_href(report_dir)
    words = report_words(run)
    blocks, statuses = _folder_blocks(report_dir, "", changed, docs, report_dir, run.get("output_dir"), words)
    iterations = _iteration_folders(report_dir)
    latest_metrics, latest = dict(metrics), dict(statuses)  # a loop's headline: each stage's latest iteration
    for folder in iterations:
        theirs, their_metrics = stage_statuses(folder, f"{folder.name}/"), read_records(folder / "metrics.json")
        for stage, st in theirs.items():
            if st["status"] != "not run":
                latest[stage], latest_metrics[stage] = st, their_metrics.get(stage, {})
    results = results_section(latest_metrics, latest, words)
    nav = render('{% if results %}<a href="#results">Results</a>{% endif %}<a href="#next">What next</a>'
                 '<a href="#headline">Headline</a>{% for s, pill in stages %}<a href="#{{ s }}">{{ s[:2] }} {{ pill }}'
                 '</a>{% endfor %}<a href="#config">Config</a>{% for f in iterations %}<a href="#{{ f.name }}">'
                 "{{ f.name }}</a>{% endfor %}", results=results, iterations=iterations,
                 stages=[(s, stage_pill(statuses[s]["status"])) for s in STAGES])
    where = join([x for x in [
        render("<code>{{ params }}</code>", params=run["params"]) if run.get("params") else "",
        join((render("<code>--set {{ o }}</code>", o=o) for o in run.get("overrides", [])), " "),
        render("· started {{ t }}", t=run["started"]) if run.get("started") else "",
        render("· finished {{ t }}", t=run["finished"]) if run.get("finished") else ""] if x], " ")
    body = [world_line(words), render('<p class="muted">{{ where }}</p>', where=where) if where else "",
            _summary_line(metrics, statuses), results,
            what_next([Scope("", metrics, statuses)] + [
                Scope(f"{f.name}/", read_records(f / "metrics.json"), stage_statuses(f, f"{f.name}/"))
                for f in iterations], run, list(STAGES), docs, words),
            headline(latest_metrics, latest, list(STAGES), min_gain,
                     f"each stage's latest iteration (of {len(iterations) + 1})" if iterations else "", words)]
    summary_path = report_dir / "loop_summary.json"
    if summary_path.exists():
        body.append(_loop_table(json.loads(summary_path.read_text(encoding="utf-8"))))
    if iterations:
        body.append(render("<h2>Iteration 1</h2>"))
    body.extend(blocks)
    body.append(render('<section id="config"><h2>Config: what this run moved from the kit\'s defaults</h2>'
                       "{% if run %}{{ table }}{% else %}<p>No run.json: run through rleif run to see it.</p>"
                       "{% endif %}</section>", run=bool(run), table=config_table(changes, run.get("reason_notes", [])) if run else ""))
    for folder in iterations:
        body.append(render('<h2 id="{{ f.name }}">Iteration {{ f.name.split("-")[1] }}</h2>', f=folder))
        body.extend(_folder_blocks(folder, f"{folder.name}/", changed, docs, report_dir, run.get("output_dir"),
                                   words)[0])
    page = render_file("report.html.j2", name=run.get("run") or report_dir.name, nav=nav,
                       blocks=[b for b in body if b])
    out = report_dir / "index.html"
    out.write_text(page, encoding="utf-8")
    return out


if __name__ == "__main__":
    import sys

    print(write_report(sys.argv[1] if len(sys.argv) > 1 else "."))
