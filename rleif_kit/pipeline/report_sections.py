"""One stage's section of ``reports/<run>/index.html`` (``report.py`` lays out the page around the sections), and
the rules every part of the page follows: how a figure is written, where a check links, where a check counts.

A section shows, top to bottom: the stage's status, and when it did not complete why (failed red with its error,
stopped amber with its reason, stale and not run grey); links to its executed notebook and its log; its failed
requests by cause; its verdicts with their numbers, thresholds and advice; the counterfactual probes drawn beside
their table; 06's accuracy per scorer; its other figures as tables; its plots. Plain HTML and inline SVG: no
script, no matplotlib. Each part is a small Jinja2 template beside the code that picks its values, rendered with
autoescaping (``markup.py``): a value is text, a part is ``Markup`` the next template takes as it is. This module
reads, top to bottom:

**Figures as text.** Never raw JSON: floats to 4 significant digits, an interval inline, a dict a nested table, a
list of records a small table of its first rows, an empty one "none"; a text of several lines (a program, a reply)
as code, escaped in a ``<pre>`` with its whitespace kept and never cut. A figure with nothing in it (compat's
accuracy on a code run) and a column no row has a value in are left out.

**Words.** A section's one line on what its stage does, and 06's score, come from the run's words
(``worlds/words.py``: its world's tasks, its reward formula's terms, its score), which ``report.py`` reads from
``run.json``.

**Links.** Every check name on the page links to its entry in ``docs/troubleshooting.md``: an ``<a id="...">`` at
its row there, named after the check (``kl_blowup``) or, for a family, after the family (``key_role`` for
``key_<role>``, ``probe_<edit>`` for ``prm_probe_<edit>`` and ``verifier_probe_<edit>``, ``sft_vs_ppo`` for
``sft_vs_ppo_<benchmark>``). The anchors are read from the page itself, so a link never points at an anchor that
is not there: a check the page does not list yet links to the page's top. The href is relative from the report
folder to the kit's ``docs/`` folder, so the page opened from ``reports/<run>/`` of a checkout resolves it; a kit
installed without its docs gets no links.

**Counting once.** 02, 03, 04, 05's gate, 06 and 07 record some of the same checks (``step_format`` in 02, 03 and
07; the score distributions and ``low_ra_share`` in 04, 05 and 07; the probes and ``reward_truth`` in 05 and 07;
``sft_vs_ppo_<benchmark>`` in 06 and 07). Each check counts once, in its *owner*: the latest stage, in pipeline
order, that is current (ok, skipped unchanged, recorded) and records it. 07 rereads every artifact after the fact,
so its verdict is the latest measurement of the run; a run that stopped before 07 counts the gate's in 05. A rule,
not a map, so a world's own checks (``sft_vs_ppo_humaneval``, ``prm_probe_off_by_one``) need no entry. The other
stages still show their row, marked "counted in NN".

**The parts of a section**, in the order it shows them:

- failed requests: ``{"total", "failed", "causes": {cause: {"count", "example"}}, "parts"?}``, a row per cause,
  each linked to its row of the troubleshooting page;
- the verdict table: a threshold the preset moved marked with the preset's reason from ``[reasons]``
  (``checks/threshold_keys.py`` says which keys set which check's thresholds);
- the counterfactual probes: one chart — a bar per probe, the share of pairs the reward moved the right way, in
  its verdict's colour, with the ok and fail lines — beside a table of their figures. The probes are verdicts named
  ``<model>_probe_<edit>`` (``checks/probes.py``): the PPO gate records them in 05 (``05_ppo/gate.json``), 07
  records them again on the run's files (its ``verdict_details``, and ``probes`` as ``{check: {moved_right,
  mean_change, pairs, status}}``). They are drawn in the stage that counts them: 07 when it ran, else 05;
- 06's breakdown by task family: each family's right / n per model, PPO's change in points and each model's
  failures by class (code: syntax error, wrong value, ...), from 06's recorded ``families``
  (``evaluation/families.py``); the page's one-glance results table at its top is the same breakdown without the
  failures (``results_table``);
- 06's accuracy per scorer: a row per model and benchmark that more than one scorer judges (GSM8k, MATH) — strict
  (the headline), flexible, compat, math-verify — and how often math-verify and strict disagree, linked to the
  run's ``06_eval/math_verify_disagreements.jsonl``. Read from the run's ``06_eval/summary.json`` (``run.json``
  names the run directory, relative to the report folder); where that is out of reach (the report folder copied
  alone), from the accuracies ``metrics.json`` records, without the disagreements;
- the stage's other figures, one row each;
- its plots: each PNG of ``reports/<run>/figures/`` embedded once, linked to its file. A plot of several panels
  side by side (the PPO curves, the reward-health curves, the score histograms) is shown at its own size up to the
  page's width, where its labels read as they do in the notebook; a single panel at half the width, two side by
  side. Either one opens at full size on a click (its file).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import os
import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable

from markupsafe import Markup

from rleif_kit.checks.threshold_keys import threshold_keys
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import DEDUP, DIAGNOSTICS, EVAL, EVOLVE, PPO, REWARD_MODELS, SETUP, SFT
from rleif_kit.core.verdict import STATUS_COLORS, fmt_number
from rleif_kit.evaluation.families import ALL, family_rows, has_families
from rleif_kit.pipeline.markup import join, render

TRUSTED = ("ok", "skipped", "recorded")  # stage statuses whose figures are this run's

# ------------------------------------------------------------------ figures as text

# Stage statuses (run_status.py) -> colour and the word shown. Grey says "do not trust these figures".
STAGE_COLOURS = {"ok": STATUS_COLORS["ok"], "skipped": STATUS_COLORS["ok"], "recorded": "#57606a",
                 "running": "#0969da", "stopped": STATUS_COLORS["warn"], "failed": STATUS_COLORS["fail"],
                 "stale": "#8c959f", "not run": "#8c959f"}
STAGE_WORDS = {"ok": "ok", "skipped": "ok · unchanged", "recorded": "recorded", "running": "running (interrupted?)",
               "stopped": "stopped", "failed": "failed", "stale": "stale", "not run": "not run"}
RECORD_ROWS = 10  # a list of records shows its first rows


def pill(text: str, colour: str, title: str = "") -> str:
    return render('<span class="pill" style="background:{{ colour }}"{% if title %} title="{{ title }}"{% endif %}>'
                  "{{ text }}</span>", text=text, colour=colour, title=title)


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


def _figure_text(v: Any) -> str:
    """A measured number as verdicts write it (``core.verdict.fmt_number``), anything else as ``fmt``."""
    numeric = isinstance(v, float) or (isinstance(v, (list, tuple)) and v and
                                       all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v))
    return fmt_number(v) if numeric else fmt(v)


def named(values: dict[str, Any], sep: str = "; ") -> str:
    """``{"mean": 0.51234, "band": [0.4, 0.7]}`` -> ``"mean = 0.5123; band = [0.4, 0.7]"``; "" for none."""
    return sep.join(f"{k} = {_figure_text(v)}" for k, v in values.items()) if isinstance(values, dict) else fmt(values)


def text_cell(value: Any) -> str:
    """A text as the page shows it: escaped; one of several lines (a program, a reply) as code in ``<pre>``, its
    whitespace and line breaks kept and never cut; anything else as ``fmt``."""
    if isinstance(value, str) and "\n" in value.strip("\n"):
        return render("<pre>{{ value }}</pre>", value=value)
    return render("{{ text }}", text=fmt(value))


def empty(value: Any) -> bool:
    """A figure with nothing in it: None, "", {}, [] or a dict of such (compat's ``{"sft": {}, "ppo": {}}`` on a
    code run): a row the page leaves out."""
    if isinstance(value, dict):
        return all(empty(v) for v in value.values())
    return value is None or value == "" or value == []


def value_cell(value: Any, depth: int = 0) -> str:
    """A dict becomes a nested table (one level of rows per key), never JSON cut mid-word; a list of records a small
    table of its first rows; a list of sentences one per line; an empty dict or list "none"; a text of several
    lines as code (``text_cell``). A column no row has a value in is left out."""
    if isinstance(value, dict) and value and depth < 2:
        if all(isinstance(v, dict) for v in value.values()) and depth == 0:
            cols = sorted({k for v in value.values() for k, x in v.items() if x is not None}, key=str)
            if 0 < len(cols) <= 8:
                return render('<table class="inner"><tr><th></th>{% for c in cols %}<th>{{ c }}</th>{% endfor %}</tr>'
                              "{% for k, cells in rows %}<tr><th>{{ k }}</th>{% for x in cells %}<td>{{ x }}</td>"
                              "{% endfor %}</tr>{% endfor %}</table>", cols=cols,
                              rows=[(k, [fmt(v.get(c)) for c in cols]) for k, v in value.items()])
        return render('<table class="inner">{% for k, cell in rows %}<tr><th>{{ k }}</th><td>{{ cell }}</td></tr>'
                      "{% endfor %}</table>", rows=[(k, value_cell(v, depth + 1)) for k, v in value.items()])
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and depth == 0:
        cols = list(dict.fromkeys(k for v in value[:RECORD_ROWS] for k, x in v.items() if not empty(x)))[:8]
        return render('<table class="inner"><tr>{% for c in cols %}<th>{{ c }}</th>{% endfor %}</tr>'
                      "{% for cells in rows %}<tr>{% for x in cells %}<td>{{ x }}</td>{% endfor %}</tr>{% endfor %}"
                      '</table>{% if more > 0 %}<div class="muted">{{ more }} more</div>{% endif %}', cols=cols,
                      rows=[[text_cell(v.get(c)) for c in cols] for v in value[:RECORD_ROWS]],
                      more=len(value) - RECORD_ROWS)
    if isinstance(value, list) and any(isinstance(v, str) and len(v) > 40 for v in value):
        return join((fmt(v) for v in value), "<br>")
    if isinstance(value, (int, float)):
        return render('<span class="num">{{ text }}</span>', text=fmt(value))
    return text_cell(value)


# ------------------------------------------------------------------ where a check links

DOCS = Path(__file__).resolve().parents[2] / "docs"  # the checkout's docs/ (absent from an installed wheel)
PAGE = "troubleshooting.md"
TOP = "troubleshooting-what-each-check-means-and-what-to-do"  # the page's title: where an unlisted check goes
STOPPED = "a-stage-stopped-or-failed"

# A family's checks -> the anchor of its row (``{}``: the part the ``*`` matched, e.g. the probe's edit)
FAMILIES = (("key_*", "key_role"), ("endpoint_*", "endpoint_role"), ("eval_*", "eval_benchmark"),
            ("sft_vs_ppo_*", "sft_vs_ppo"), ("prm_probe_*", "probe_{}"), ("verifier_probe_*", "probe_{}"),
            ("irm_probe_*", "irm_probe_{}"), ("*_probe_*", "the_probes"))
ANCHOR_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def page_anchors(text: str) -> set[str]:
    """Every anchor of a markdown page: its headings' and its ``<a id="...">`` ones."""
    return {slug(h) for h in HEADING.findall(text)} | set(ANCHOR_ID.findall(text))


@lru_cache(maxsize=4)
def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8") if path.exists() else ""


def troubleshooting_text(docs: Path = DOCS) -> str:
    return _read(docs / PAGE)


@lru_cache(maxsize=4)
def _anchors(text: str) -> frozenset[str]:
    return frozenset(page_anchors(text))


def check_anchor(check: str, anchors: Iterable[str] | None = None) -> str:
    """The anchor of ``check``'s entry in the troubleshooting page (its top when it has none)."""
    known = _anchors(troubleshooting_text()) if anchors is None else set(anchors)
    if check in known:
        return check
    for pattern, anchor in FAMILIES:
        if fnmatchcase(check, pattern):
            rest = check.split("_probe_", 1)[-1] if "_probe_" in check else ""
            if anchor.format(rest) in known:
                return anchor.format(rest)
    return TOP


def cause_anchor(cause: str) -> str:
    """The anchor of a request failure's cause (``http 4xx`` -> ``failure-http-4xx``) in the stopped-stage table."""
    anchor = "failure-" + re.sub(r"[^a-z0-9]+", "-", cause.lower()).strip("-")
    return anchor if anchor in _anchors(troubleshooting_text()) else STOPPED


def stage_anchor(status: str, reason: str = "") -> str:
    """The row of a stage that did not complete: stopped, terminated by a signal, failed, or left running."""
    terminated = status in ("stopped", "running") and ("sigterm" in reason.lower() or "terminated" in reason.lower())
    anchor = "stage-terminated" if terminated else f"stage-{status}"
    return anchor if anchor in _anchors(troubleshooting_text()) else STOPPED


def docs_href(report_dir: Path, docs: Path = DOCS) -> str | None:
    """The kit's docs folder relative to the report folder (``../../docs`` for ``reports/<run>``); None without it."""
    if not (docs / PAGE).exists():
        return None
    try:
        return Path(os.path.relpath(docs, Path(report_dir).resolve())).as_posix()
    except ValueError:  # another drive (Windows): no relative path
        return None


def doc_entry(anchor: str, text: str | None = None) -> dict[str, str]:
    """The troubleshooting table row that holds ``<a id="anchor">``: {column header: cell, as markdown}."""
    text = troubleshooting_text() if text is None else text
    header: list[str] | None = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif f'id="{anchor}"' in line:
            return dict(zip(header, cells))
    return {}


MD_SPAN = re.compile(r"`([^`]+)`|\*\*([^*]+)\*\*")  # code, or bold (which may hold code)


def md_inline(text: str) -> str:
    """A table cell's markdown as HTML: code, bold, a link's text (its target is the docs' own, not the page's). The
    text between them is escaped like any other value."""
    out = re.sub(r"<a\s+(?:id|name)=\"[^\"]*\"></a>", "", text)
    return _md_spans(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", out))


def _md_text(text: str) -> Markup:
    # The one escape outside a template: markdown's plain text between its spans, as the text of an element, where a
    # quote needs no escaping (the page keeps reading "the task's tests", as the tests that read it expect).
    return Markup(html.escape(text, quote=False))


def _md_spans(text: str) -> str:
    parts, at = [], 0
    for m in MD_SPAN.finditer(text):
        parts.append(_md_text(text[at:m.start()]))
        parts.append(render("<code>{{ t }}</code>", t=m[1]) if m[1] is not None else
                     render("<b>{{ t }}</b>", t=_md_spans(m[2])))
        at = m.end()
    return join(parts + [_md_text(text[at:])])


def doc_link(docs: str | None, anchor: str, text: str) -> str:
    """``text`` (text, or the kit's markup) linked to ``anchor`` of the troubleshooting page; the text alone without
    the kit's docs."""
    return render('{% if docs %}<a href="{{ docs }}/{{ page }}#{{ anchor }}">{{ text }}</a>{% else %}{{ text }}'
                  "{% endif %}", docs=docs, page=PAGE, anchor=anchor, text=text)


def check_cell(check: str, docs: str | None) -> str:
    """The check's name, linked to its troubleshooting entry when the kit's docs are there."""
    return render('{% if docs %}<a class="check" href="{{ docs }}/{{ page }}#{{ anchor }}">{{ check }}</a>'
                  "{% else %}{{ check }}{% endif %}", docs=docs, page=PAGE, check=check,
                  anchor=check_anchor(check) if docs else "")


# ------------------------------------------------------------------ where a check counts


def stage_verdicts(metrics: dict[str, Any]) -> list[dict[str, Any]]:
    """A stage's verdicts as recorded: ``verdict_details`` (each whole), else ``{check: status}`` as bare rows."""
    details = metrics.get("verdict_details")
    if isinstance(details, list):
        return [d for d in details if isinstance(d, dict) and d.get("check")]
    raw = metrics.get("verdicts")
    if not isinstance(raw, dict):
        return []
    return [{"check": k, "status": v if isinstance(v, str) else (v or {}).get("status", "")} for k, v in raw.items()]


def owners(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]],
           order: Iterable[str]) -> dict[str, str]:
    """check -> the stage that counts it: the latest current stage that records it."""
    out: dict[str, str] = {}
    for stage in order:
        if statuses.get(stage, {}).get("status") in TRUSTED:
            out.update({v["check"]: stage for v in stage_verdicts(metrics.get(stage, {}))})
    return out


def counted(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]],
            order: Iterable[str]) -> list[tuple[str, dict[str, Any]]]:
    """(stage, verdict) of each check once, in its owner, in pipeline order."""
    order = list(order)
    owner = owners(metrics, statuses, order)
    out = []
    for stage in order:
        mine = {v["check"]: v for v in stage_verdicts(metrics.get(stage, {})) if owner.get(v["check"]) == stage}
        out.extend((stage, v) for v in mine.values())
    return out


def stale_checks(metrics: dict[str, dict[str, Any]], statuses: dict[str, dict[str, Any]],
                 order: Iterable[str]) -> set[str]:
    """Checks recorded only by stale stages (not counted: their figures are an older run's)."""
    order = list(order)
    owner = owners(metrics, statuses, order)
    return {v["check"] for s in order if statuses.get(s, {}).get("status") == "stale"
            for v in stage_verdicts(metrics.get(s, {})) if v["check"] not in owner}


# ------------------------------------------------------------------ the status banner and the failed requests


def _problem(st: dict[str, Any]) -> str:
    """Why a stage's figures are not this run's: failed, stopped, stale, not run or left running; "" when they are."""
    status = st.get("status", "")
    if status in TRUSTED:
        return ""
    what = {"failed": "This stage failed", "stopped": "This stage stopped before it was complete",
            "stale": "These figures are stale: they are from an older run", "not run": "Not run",
            "running": "Still marked running: the run was interrupted"}.get(status, status)
    return render('<div class="problem {{ kind }}"><b>{{ what }}.</b> {{ reason }}</div>',
                  kind=status.replace(" ", ""), what=what, reason=st.get("reason") or "")


def failures_table(failures: Any, docs: str | None) -> str:
    """``{"total", "failed", "causes": {cause: {"count", "example"}}, "parts"?}``: a caption and a row per cause."""
    if not isinstance(failures, dict) or not failures.get("failed"):
        return ""
    parts = [p for p in failures.get("parts") or [] if isinstance(p, dict) and p.get("failed")]
    detail = " (" + "; ".join(f"{p.get('failed')} of {p.get('total')} {p.get('what', '')}".strip() for p in parts) + ")"
    rows = [(doc_link(docs, cause_anchor(c), c), fmt(e.get("count")), e.get("example") or "none")
            for c, e in (failures.get("causes") or {}).items() if isinstance(e, dict)]
    return render('<table class="failures"><caption>{{ failed }} of {{ total }} requests failed{{ detail }}, by cause'
                  "</caption><tr><th>cause</th><th>count</th><th>one example</th></tr>"
                  '{% for cause, n, example in rows %}<tr><th>{{ cause }}</th><td class="num">{{ n }}</td>'
                  '<td class="example">{{ example }}</td></tr>'
                  "{% endfor %}</table>", failed=failures["failed"], total=failures.get("total", "?"),
                  detail=detail if parts else "", rows=rows)


# ------------------------------------------------------------------ the verdict table


def _numbers(d: Any) -> str:
    if not isinstance(d, dict):
        return fmt(d) if d else "—"
    return join((f"{k} = {_figure_text(v)}" for k, v in d.items()), "<br>") or "—"


def preset_marks(check: str, changed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The moved config keys behind ``check``'s thresholds (``checks/threshold_keys.py``), in that table's order."""
    return [changed[k] for k in threshold_keys(check) if k in changed]


def verdict_table(metrics: dict[str, Any], changed: dict[str, dict[str, Any]], docs: str | None = None,
                  stage: str = "", owner: dict[str, str] | None = None, prefix: str = "") -> str:
    """Check | status | numbers | thresholds | advice; ``verdict_details`` when recorded, else the statuses alone.
    A verdict whose thresholds come from a key the run moved from its default is marked with the key and reason;
    one counted in another stage (``owner``: check -> stage, ``owners``) says where."""
    details = stage_verdicts(metrics)
    if not details:
        return ""
    rows = []
    for v in details:
        marks = preset_marks(v.get("check", ""), changed)
        mark = join(render('<div class="preset" title="{{ reason or \'no reason given\' }}">preset: {{ key }} = '
                           "{{ value }} (kit default {{ default }}){% if reason %} — {{ reason }}{% endif %}</div>",
                           reason=c["reason"], key=c["key"], value=fmt(c["value"]), default=fmt(c["default"]))
                    for c in marks)
        where = (owner or {}).get(v["check"], stage if owner is None else None)
        elsewhere = "" if where == stage else render(
            '{% if where %}<div class="muted">counted in <a href="#{{ prefix }}{{ where }}">{{ where[:2] }}</a></div>'
            '{% else %}<div class="muted">not counted: not a current stage</div>{% endif %}', where=where,
            prefix=prefix)
        rows.append(render('<tr class="verdict {{ status }}{% if elsewhere %} elsewhere{% endif %}"><th>{{ check }}'
                           "{{ elsewhere }}</th><td>{{ pill }}</td><td>{{ numbers }}</td><td>{{ thresholds }}{{ mark }}"
                           "</td><td>{{ advice }}</td></tr>", status=v.get("status", ""), elsewhere=elsewhere,
                           check=check_cell(v["check"], docs), pill=verdict_pill(v.get("status", "")),
                           numbers=_numbers(v.get("numbers", {})), thresholds=_numbers(v.get("thresholds", {})),
                           mark=mark, advice=v.get("advice") or ""))
    return render('<table class="verdicts"><tr><th>check</th><th>status</th><th>numbers</th><th>thresholds</th>'
                  "<th>advice</th></tr>{{ rows }}</table>", rows=join(rows))


# ------------------------------------------------------------------ the counterfactual probes

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
    ticks = [(f"{x(t):.1f}", f"{t:.0%}") for t in (0, 0.25, 0.5, 0.75, 1.0)]
    bars = [{"y": top + i * row_h, "name": r["check"].replace("_probe_", " "), "check": r["check"],
             "status": r["status"], "colour": STATUS_COLORS.get(r["status"], "#57606a"),
             "width": f"{x(r['moved_right']) - x(0):.1f}", "share": f"{r['moved_right']:.0%}",
             "end": f"{x(r['moved_right']) + 4:.1f}"} for i, r in enumerate(rows)]
    lines = [{"status": status, "x": f"{x(value):.1f}", "colour": STATUS_COLORS[status], "label": label,
              "text_x": f"{x(value) + (3 if status == 'ok' else -3):.1f}",
              "anchor": "start" if status == "ok" else "end"}
             for value, status, label in ((ok_at, "ok", f"ok from {ok_at:.0%}"),
                                          (fail_at, "fail", f"fail at {fail_at:.0%} or below"))]
    return render(
        '<svg class="probes" width="{{ width }}" height="{{ height }}" role="img" aria-label="counterfactual probes: '
        'share of pairs the reward moved the right way">'
        '{% for tx, tick in ticks %}<line x1="{{ tx }}" y1="{{ top - 4 }}" x2="{{ tx }}" y2="{{ height - 30 }}" '
        'stroke="#d0d7de"/><text x="{{ tx }}" y="{{ height - 18 }}" font-size="11" text-anchor="middle">{{ tick }}'
        "</text>{% endfor %}"
        '{% for b in bars %}<text x="{{ left - 6 }}" y="{{ b.y + 15 }}" font-size="11" text-anchor="end">{{ b.name }}'
        '</text><rect class="bar" x="{{ x0 }}" y="{{ b.y + 4 }}" width="{{ b.width }}" height="{{ row_h - 8 }}" '
        'fill="{{ b.colour }}"><title>{{ b.check }}: {{ b.share }} ({{ b.status }})</title></rect>'
        '<text x="{{ b.end }}" y="{{ b.y + 15 }}" font-size="11">{{ b.share }}</text>{% endfor %}'
        '{% for l in lines %}<line class="{{ l.status }}-line" x1="{{ l.x }}" y1="{{ top - 8 }}" x2="{{ l.x }}" '
        'y2="{{ height - 30 }}" stroke="{{ l.colour }}" stroke-width="2" stroke-dasharray="5 3"/>'
        '<text x="{{ l.text_x }}" y="{{ top - 10 }}" font-size="11" fill="{{ l.colour }}" text-anchor="{{ l.anchor }}">'
        "{{ l.label }}</text>{% endfor %}"
        '<text x="{{ width - right }}" y="{{ height - 4 }}" font-size="11" fill="#57606a" text-anchor="end">'
        "share of pairs moved the right way</text></svg>", width=width, height=height, top=top, left=left,
        right=right, row_h=row_h, x0=f"{x(0):.1f}", ticks=ticks, bars=bars, lines=lines)


def _signed(value: Any) -> str:
    return f"{value:+.3f}" if isinstance(value, (int, float)) else fmt(value)


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
    cells = [{"status": r["status"], "check": check_cell(r["check"], docs), "pill": verdict_pill(r["status"]),
              "moved": f"{r['moved_right']:.0%}", "change": _signed(r["mean_change"]), "ci": _interval(r["ci95"]),
              "pairs": fmt(r["pairs"]), "must": MUST.get(r["direction"], r["direction"] or "—")} for r in rows]
    return render(
        '<div class="probes-block"><h3>What the reward reads: the counterfactual probes</h3><div class="side">'
        '<table class="probes"><tr><th>probe</th><th>status</th><th>moved right</th><th>mean change<div '
        'class="muted">95% interval</div></th><th>pairs</th><th>must go</th></tr>'
        '{% for r in rows %}<tr class="probe {{ r.status }}"><th>{{ r.check }}</th><td>{{ r.pill }}</td>'
        '<td class="num">{{ r.moved }}</td><td class="num">{{ r.change }}<div class="muted">{{ r.ci }}</div></td>'
        '<td class="num">{{ r.pairs }}</td><td>{{ r.must }}</td></tr>{% endfor %}</table>{{ chart }}</div></div>',
        rows=cells, chart=probe_chart(rows, ok_at, fail_at))


# ------------------------------------------------------------------ 06's accuracy per scorer

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
        return render('<a href="{{ href }}">{{ n }}</a>', href=href, n=n) if href and n else str(n)

    return render(
        '<table class="scorers"><caption>Accuracy per scorer</caption><tr><th>model</th><th>benchmark</th>'
        "{% for c, _ in scorers %}<th>{{ c }}</th>{% endfor %}<th>disagreements (math-verify vs strict)</th></tr>"
        "{% for m, b, pcts, n in rows %}<tr><th>{{ m }}</th><th>{{ b }}</th>"
        '{% for p in pcts %}<td class="num">{{ p }}</td>{% endfor %}<td class="num">{{ n }}</td></tr>{% endfor %}'
        '</table><p class="muted">flexible (GSM8k: the last number), compat (WizardMath\'s published scorer) and '
        "math-verify are other readings of the same answers{% if second %}; the items where math-verify "
        "{{ second.get('version') or '' }} and strict disagree, both readings on each line: "
        '{% if href %}<a href="{{ href }}">{{ name }}</a>{% else %}{{ second.get("disagreements", "") }}{% endif %}'
        "{% endif %}</p>", scorers=SCORERS, second=second, href=href, name=Path(href).name if href else "",
        rows=[(m, b, [pct(s.get(k)) for _, k in SCORERS], disagreements(s)) for m, b, s in rows])


# ------------------------------------------------------------------ 06's results: at a glance, and by family


def _rows_table(rows: list[dict[str, Any]], cls: str, caption: str = "") -> str:
    """Display rows (one dict each, the keys in column order; a missing cell a dash) as a plain table."""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    body = [("all" if r.get("family") == ALL else "",
             [(isinstance(r.get(c), (int, float)), text_cell(r.get(c)) if c in r else "—") for c in cols])
            for r in rows]
    return render('<table class="{{ cls }}">{% if caption %}<caption>{{ caption }}</caption>{% endif %}<tr>'
                  "{% for c in cols %}<th>{{ c }}</th>{% endfor %}</tr>{% for kind, cells in body %}"
                  '<tr class="{{ kind }}">{% for num, cell in cells %}<td{% if num %} class="num"{% endif %}>{{ cell }}'
                  "</td>{% endfor %}</tr>{% endfor %}</table>", cls=cls, caption=caption, cols=cols, body=body)


def _breakdowns(metrics: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """06's ``families`` (benchmark -> breakdown, ``evaluation/families.py``); for a run recorded before it, each
    benchmark's one "all" row out of its recorded ``accuracy`` and ``n_items``."""
    families = metrics.get("families")
    if isinstance(families, dict) and families:
        return {b: e for b, e in families.items() if isinstance(e, list)}
    accuracy, n_items = metrics.get("accuracy") or {}, metrics.get("n_items") or {}
    out: dict[str, list[dict[str, Any]]] = {}
    for model, benches in accuracy.items() if isinstance(accuracy, dict) else ():
        for bench, acc in (benches or {}).items() if isinstance(benches, dict) else ():
            n = (n_items.get(model) or {}).get(bench) if isinstance(n_items, dict) else None
            if isinstance(acc, (int, float)) and isinstance(n, int):
                entry = out.setdefault(bench, [{"family": ALL, "n": {}, "right": {}}])[0]
                entry["n"][model], entry["right"][model] = n, round(acc * n)
    return out


def results_table(metrics: dict[str, Any], score: str = "accuracy") -> str:
    """The one-glance table at the top of the page: each model's ``score`` (the world's: accuracy, pass@1) per
    benchmark, and per task family where a benchmark has families, with PPO's change over SFT; "" before 06."""
    rows = []
    for bench, entries in _breakdowns(metrics).items():
        shown = entries if has_families(entries) else [e for e in entries if e.get("family") == ALL]
        rows += [{k: v for k, v in r.items() if not k.endswith(" failures")}
                 for r in family_rows({bench: shown}, score)]
    if not rows:
        return ""
    if not any(r["family"] != ALL for r in rows):  # no benchmark has families: no column for them
        rows = [{k: v for k, v in r.items() if k != "family"} for r in rows]
    return _rows_table(rows, "results", f"{score} by model" + (", and by task family" if any(
        "family" in r for r in rows) else "") + " (right / n)")


def family_block(metrics: dict[str, Any], score: str = "accuracy") -> str:
    """06's breakdown by family: each family's right / n per model, PPO's change, each model's failures by
    class where the world classes them; "" when no benchmark of the run has families."""
    shown = {b: e for b, e in _breakdowns(metrics).items() if has_families(e)}
    if not shown:
        return ""
    return _rows_table(family_rows(shown, score), "families", f"SFT vs PPO by task family: {score} (right / n)"
                       " and why the wrong ones are wrong")


# ------------------------------------------------------------------ the other figures, and the plots


def figures_table(metrics: dict[str, Any], skip: tuple[str, ...] = ()) -> str:
    """The stage's recorded figures, one row each (``skip``: those drawn elsewhere on the page); a figure with
    nothing in it (``empty``: a scorer the run's benchmarks do not have) is left out."""
    rows = [(k, value_cell(v)) for k, v in metrics.items()
            if k not in ("verdicts", "verdict_details", *skip) and not empty(v)]
    return render('<table class="figures">{% for k, cell in rows %}<tr><th>{{ k }}</th><td>{{ cell }}</td></tr>'
                  "{% endfor %}</table>", rows=rows) if rows else ""


WIDE_PX = 900  # a figure this wide (several panels side by side) gets the page's whole width, not half of it
REDRAWN = {"dedup_operators"}  # 07's notebook draws 02's view again, from the same file, for its own reader


def png_width(raw: bytes) -> int:
    """A PNG's width in pixels from its header (0 when it is not a PNG)."""
    return int.from_bytes(raw[16:20], "big") if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24 else 0


def figure(path: Path, href: str) -> str:
    """The plot embedded, linked to its file (click to open it at full size). A wide one — several panels — is
    shown at its own size up to the page's width, where its labels read as in the notebook; a single panel at
    half the width, two side by side."""
    raw = path.read_bytes()
    return render('<figure{% if wide %} class="wide"{% endif %}><a href="{{ href }}" '
                  'title="click to open at full size"><img alt="{{ path.stem }}" '
                  'src="data:image/png;base64,{{ data }}"></a><figcaption>{{ path.name }} · '
                  '<a href="{{ href }}">full size</a></figcaption></figure>', wide=png_width(raw) >= WIDE_PX,
                  href=href, path=path, data=base64.b64encode(raw).decode("ascii"))


def unique(pngs: list[Path]) -> list[Path]:
    """One copy of a plot: the same bytes under two names, or a later stage's redraw of an earlier one's (REDRAWN)."""
    seen, names, out = set(), set(), []
    for p in pngs:
        digest, view = hashlib.sha256(p.read_bytes()).hexdigest(), p.stem[3:]
        if digest not in seen and not (view in REDRAWN and view in names):
            seen.add(digest)
            names.add(view)
            out.append(p)
    return out


# ------------------------------------------------------------------ the section


def stage_about(stage: str, words: Any) -> str:
    """What a stage does, one line in the run's words (its world's tasks, its reward's terms, its score); "" without
    them."""
    if words is None:
        return ""
    about = {
        SETUP: "the base model, the endpoints and the run's settings",
        EVOLVE: "Evol-Instruct: new {{ w.tasks }} evolved from the seeds, ranked by {{ judge }}",
        DEDUP: "near-duplicate {{ w.tasks }} and those that overlap the held-out set removed; the SFT data",
        SFT: "supervised fine-tuning on the evolved {{ w.tasks }}: held-out {{ w.score }} before and after",
        REWARD_MODELS: "the reward models behind <code>{{ w.shown }}</code> — {% for t in w.terms %}"
                       "{% if not loop.first %}; {% endif %}<b>{{ t }}</b>: {{ sources[t] }}{% endfor %}",
        PPO: "PPO on the reward <code>{{ w.shown }}</code>",
        EVAL: "SFT vs PPO: {{ w.score }} on the benchmarks, by task family where a benchmark has them",
        DIAGNOSTICS: "the reward's health, read again from the run's files: its terms, the probes, and "
                     "whether <code>{{ w.shown }}</code> follows the truth ({{ w.right }} or not)",
    }
    if stage not in about:
        return ""
    return render(about[stage], w=words, judge=md_inline(words.judge),
                  sources={t: md_inline(words.sources[t]) for t in words.terms})


@dataclass
class Links:
    """What every stage section links to: the moved config keys, the docs folder, each check's counting stage, the
    run directory (its artifacts, e.g. 06's disagreement file) and the page's folder (links are relative to it)."""
    changed: dict[str, dict[str, Any]]
    docs: str | None
    owner: dict[str, str] = field(default_factory=dict)
    run: RunPaths | None = None
    page: Path = Path(".")
    words: Any = None  # the run's words (``worlds/words.py``: world, formula, score), None without run.json


def stage_section(folder: Path, prefix: str, stage: str, metrics: dict[str, Any], figures: list[Path],
                  st: dict[str, Any], links: Links) -> str:
    """One stage's ``<section>``. ``prefix``: "" for the run's own folder, "iter-k/" for an iteration's (ids and
    links); ``figures``: the stage's ``figures/NN_*.png``; ``st``: its status in ``run.json`` (``report.py``)."""
    status = st.get("status", "not run")
    about = stage_about(stage, links.words)
    parts = [render('<section class="stage {{ kind }}" id="{{ prefix }}{{ stage }}" data-stage="{{ stage }}" '
                    'data-status="{{ status }}"><h2>{{ stage }} {{ pill }}{% if seconds is not none %} '
                    '<span class="muted">{{ seconds }} s</span>{% endif %}</h2>', kind=status.replace(" ", ""),
                    prefix=prefix, stage=stage, status=status, pill=stage_pill(status),
                    seconds=f"{st['seconds']:.0f}" if "seconds" in st else None),
             render('<p class="about">{{ about }}</p>', about=about) if about else "", _problem(st)]
    # the log: relative to the run's report folder already, an iteration's too
    parts.append(render('{% if notebook or log %}<p class="muted">{% if notebook %}executed notebook: '
                        '<a href="{{ prefix }}{{ stage }}.ipynb">{{ stage }}.ipynb</a>{% endif %}'
                        "{% if notebook and log %} · {% endif %}"
                        '{% if log %}log: <a href="{{ log }}">{{ log }}</a>{% endif %}</p>{% endif %}',
                        notebook=(folder / f"{stage}.ipynb").exists(), log=st.get("log"), prefix=prefix,
                        stage=stage))
    parts.append(failures_table(metrics.get("failures"), links.docs))
    if status in ("failed", "not run") and not metrics:
        return join((p for p in parts if p), "\n") + Markup("</section>")
    parts.append(verdict_table(metrics, links.changed, links.docs, stage, links.owner, prefix))
    # the probes where they are counted: a chart beside their table (07's matplotlib copy is the same chart)
    probes = probe_block(metrics, links.changed, links.docs) if any(
        links.owner.get(c) == stage for c in links.owner if "_probe_" in c) else ""
    parts.append(probes)
    if stage == EVAL:  # accuracy per scorer; the run's summary.json only when these figures are this run's
        parts.append(scorer_table(metrics, links.run if status in TRUSTED else None, links.page))
        parts.append(family_block(metrics, links.words.score if links.words else "accuracy"))
    drawn = ("failures", "probes") if probes else ("failures",)
    parts.append(figures_table(metrics, drawn + (("families",) if stage == EVAL else ())))
    parts.extend(figure(p, prefix + "figures/" + p.name) for p in figures
                 if not (probes and p.stem.endswith("_probes")))
    return join((p for p in parts if p), "\n") + Markup("</section>")
