"""Where the report links a check, and where it counts it.

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
"""

from __future__ import annotations

import os
import re
from fnmatch import fnmatchcase
from functools import lru_cache
from html import escape
from pathlib import Path
from typing import Any, Iterable

DOCS = Path(__file__).resolve().parents[2] / "docs"  # the checkout's docs/ (absent from an installed wheel)
PAGE = "troubleshooting.md"
TOP = "troubleshooting-what-each-check-means-and-what-to-do"  # the page's title: where an unlisted check goes
STOPPED = "a-stage-stopped-or-failed"
TRUSTED = ("ok", "skipped", "recorded")  # stage statuses whose figures are this run's

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


def md_inline(text: str) -> str:
    """A table cell's markdown as HTML: code, bold, a link's text (its target is the docs' own, not the page's)."""
    out = re.sub(r"<a\s+(?:id|name)=\"[^\"]*\"></a>", "", text)
    out = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", escape(out, quote=False))
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)
