"""The report's "what next" box, its links into docs/troubleshooting.md, each check counted once, no raw braces,
the probes' chart, failed requests by cause, a stopped run, and multi-panel figures at the page's width.

Report folders built by hand under tmp_path (no pipeline runs); the page as headless Chromium renders it, on a
file:// URL with background networking off, no network (``test_report._chromium`` skips without it)."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from conftest import ROOT
from test_report import _chromium, _png, _run_chromium, _share, _verdict

from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import STAGES
from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report import write_report
from rleif_kit.pipeline.report_figures import png_width
from rleif_kit.pipeline.report_checks import (
    TOP,
    check_anchor,
    counted,
    doc_entry,
    docs_href,
    owners,
    page_anchors,
)
from rleif_kit.pipeline.report_next import failures_table
from rleif_kit.pipeline.report_parts import fmt, value_cell
from rleif_kit.pipeline.report_probes import probe_chart, probe_rows

DOC = ROOT / "docs" / "troubleshooting.md"
GREEN_WIDE = (120, 190, 20)  # a colour only the test's wide figure has
AMBER = tuple(int(STATUS_COLORS["warn"][i:i + 2], 16) for i in (1, 3, 5))
RED = tuple(int(STATUS_COLORS["fail"][i:i + 2], 16) for i in (1, 3, 5))


def _probe(name, status, moved, direction="down"):
    return _verdict(f"prm_probe_{name}", status, {"pairs": 200, "moved_right": moved, "mean_change": -0.2,
                                                  "ci95": [-0.3, -0.1]},
                    {"ok_at": 0.8, "fail_at_or_below": 0.4, "direction": direction},
                    "" if status == "ok" else f"the PRM misses {name}")


def _stage(checks):
    """A stage's recorded verdicts as ``record("verdicts", [...])`` stores them: statuses and each one whole."""
    return {"verdicts": {v["check"]: v["status"] for v in checks}, "verdict_details": checks}


def _ok(check):
    return _verdict(check, "ok", {"n": 10}, {"min": 1})


PROBES = [_probe("wrong_answer", "ok", 0.99), _probe("cut_answer", "fail", 0.2),
          _probe("commute", "warn", 0.56, "same")]
# 14 distinct checks over 27 rows: step_format in 02, 03 and 07; the distributions and low_ra_share in 04, 05 and
# 07; the probes and reward_truth in 05 and 07; sft_vs_ppo_arith in 06 and 07
METRICS = {
    "00_setup": {"base_model": "/models/tiny", "data": {"seeds": {"records": None, "rejected": {}}}, "endpoints": []},
    "01_evolve": {"kept": 10, "eliminated": 2, "reasons": {}, "per_operator": {"deepen": {}, "concretize": {}},
                  "failures": {"total": 12, "failed": 1, "causes": {"timeout": {"count": 1, "example":
                                                                                 "e-3: timeout after 60 s"}}}},
    "02_dedup": {"kept": 9, **_stage([_ok("step_format"), _ok("kept_floor")])},
    "03_sft": {"steps": 5, **_stage([_ok("step_format"), _ok("sft_learning")])},
    "04_reward_models": _stage([_ok("irm_distribution"), _ok("prm_distribution"), _ok("low_ra_share")]),
    "05_ppo": {"stopped": "", "timing": {}, **_stage([_ok("irm_distribution"), _ok("prm_distribution"),
                                                      _ok("low_ra_share"), *PROBES, _ok("reward_truth"),
                                                      _ok("sft_vs_ppo")])},
    "06_eval": {"ab": {"arith": {"gain": 0.04, "ci95": [0.01, 0.07], "n": 500}}, "pending": [],
                **_stage([_ok("sft_vs_ppo_arith")])},
    "07_reward_diagnostics": {"skipped": [], "probes": {p["check"]: {"moved_right": p["numbers"]["moved_right"]}
                                                        for p in PROBES},
                              **_stage([_verdict("evolve_failures", "ok", {"failed": 0, "by_cause": {}}, {}),
                                        _verdict("step_format", "warn", {"share_with_steps": 0.85}, {"min": 0.9},
                                                 "answers without steps"), _ok("kept_floor"),
                                        _ok("irm_distribution"), _ok("prm_distribution"), _ok("low_ra_share"),
                                        *PROBES, _ok("reward_truth"), _ok("kl_blowup"), _ok("sft_vs_ppo_arith")])},
}


def _report(tmp_path, stages=None, metrics=None, name="run"):
    d = tmp_path / "reports" / name
    statuses = {s: {"status": "ok", "reason": "", "seconds": 5.0} for s in STAGES}
    statuses.update(stages or {})
    write_json_atomic(d / "run.json", {"run": name, "params": "params/tiny-cpu.toml", "overrides": ["ppo.lr=1e-4"],
                                       "stages": statuses, "config_changes": [
                                           {"key": "base.report_to", "value": [], "default": ["tensorboard"],
                                            "override": False, "reason": ""}]})
    write_json_atomic(d / "metrics.json", METRICS if metrics is None else metrics)
    for stage in STAGES:
        (d / f"{stage}.ipynb").write_text('{"cells": []}')
    return d


class _Dom(HTMLParser):
    """The page's visible text (not its style sheet), its ids, its links, the what-next box's text and links."""

    def __init__(self):
        super().__init__()
        self.text, self.ids, self.links, self.box_text, self.box_links = [], set(), [], [], []
        self.bars, self._skip, self._box = 0, 0, 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        self._skip += tag in ("style", "title")
        if tag == "section" and a.get("id") == "next" or (self._box and tag == "section"):
            self._box += 1
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
            if self._box:
                self.box_links.append(a["href"])
        if tag == "rect" and "bar" in (a.get("class") or ""):
            self.bars += 1

    def handle_endtag(self, tag):
        self._skip -= tag in ("style", "title")
        if tag == "section" and self._box:
            self._box -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)
            if self._box:
                self.box_text.append(data)


def _dom(html: str) -> _Dom:
    dom = _Dom()
    dom.feed(html)
    return dom


def _check_links(index: Path, dom: _Dom) -> list[str]:
    """Every link resolves: a page anchor to an element of the page, a file to an existing file, a troubleshooting
    link to an anchor of docs/troubleshooting.md. Returns the troubleshooting anchors linked."""
    linked = []
    for href in dom.links:
        url = urlparse(href)
        if url.scheme in ("http", "https"):
            continue
        if not url.path:
            assert url.fragment in dom.ids, f"#{url.fragment}: no such id on the page"
            continue
        target = (index.parent / unquote(url.path)).resolve()
        assert target.exists(), f"{href}: no such file"
        if target.name == "troubleshooting.md":
            assert target == DOC.resolve()
            assert url.fragment in page_anchors(DOC.read_text(encoding="utf-8")), f"{href}: no such anchor"
            linked.append(url.fragment)
    return linked


def _render_dom(tmp_path, d, name, height=2400):
    from PIL import Image

    url = write_report(d).as_uri()
    dom = _run_chromium(tmp_path, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp_path / f"{name}.png"
    result = _run_chromium(tmp_path, url, f"--screenshot={shot}", f"--window-size=1200,{height}")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    return _dom(dom.stdout), Image.open(shot)


# ------------------------------------------------------------------ pure helpers


def _emittable() -> set[str]:
    """Every check name the kit can emit: the literal ``Verdict("name"`` ones, and each family over what the kit
    registers (roles, benchmarks, every world's probe edits)."""
    from rleif_kit.checks.probes import IRM_ADVICE
    from rleif_kit.core.settings import ROLES
    from rleif_kit.worlds import all_worlds

    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "rleif_kit").rglob("*.py"))
    names = set(re.findall(r'Verdict\(\s*"([a-z_]+)"', source))
    names |= {"base_model", "irm_base", "prm_base", "evolve_model", "data_seeds", "data_sft", "data_gsm8k_train",
              "data_math_train", "irm_distribution", "prm_distribution", "sft_vs_ppo"}
    names |= {f"{kind}_{role}" for role in ROLES for kind in ("key", "endpoint")}
    for world in all_worlds():
        names |= {f"{kind}_{b.name}" for b in world.benchmarks for kind in ("eval", "sft_vs_ppo")}
        names |= {f"{model}_probe_{edit}" for edit in world.solution_edits for model in ("prm", "verifier")}
    return names | {f"irm_probe_{edit}" for edit in IRM_ADVICE}


def test_every_check_the_kit_can_emit_has_a_troubleshooting_entry():
    text = DOC.read_text(encoding="utf-8")
    names = _emittable()
    assert {"kl_blowup", "reward_terms", "probes", "key_evolve", "prm_probe_off_by_one", "irm_probe_ambiguous",
            "sft_vs_ppo_humaneval", "eval_gsm8k"} <= names and len(names) > 60
    missing = sorted(n for n in names if check_anchor(n) == TOP)
    assert missing == [], "add a row with <a id=...> to docs/troubleshooting.md for these"
    rowless = sorted(n for n in names if not doc_entry(check_anchor(n)).get("what to do"))
    assert rowless == [], "each entry's row says what to do"
    ids = re.findall(r'<a id="([^"]+)"', text)
    assert len(ids) == len(set(ids)), "an anchor given twice"


def test_a_check_links_to_its_row_or_its_family_and_an_unknown_one_to_the_top():
    anchors = page_anchors(DOC.read_text(encoding="utf-8"))
    assert check_anchor("kl_blowup", anchors) == "kl_blowup"
    assert check_anchor("key_irm_judge", anchors) == "key_role"
    assert check_anchor("verifier_probe_corrupt_step", anchors) == "probe_corrupt_step"
    assert check_anchor("sft_vs_ppo_gsm8k", anchors) == "sft_vs_ppo"
    assert check_anchor("prm_probe_new_edit", anchors) == "the_probes"  # a world's edit not listed yet
    assert check_anchor("something_new", anchors) == TOP and TOP in anchors
    assert docs_href(ROOT / "reports" / "tiny-cpu") == "../../docs"
    assert docs_href(ROOT, docs=ROOT / "no-such-folder") is None  # an installed kit without docs: no links


def test_each_check_is_counted_once_in_the_latest_current_stage_that_records_it():
    statuses = {s: {"status": "ok"} for s in STAGES}
    owner = owners(METRICS, statuses, STAGES)
    assert owner["step_format"] == "07_reward_diagnostics" and owner["sft_learning"] == "03_sft"
    assert owner["sft_vs_ppo"] == "05_ppo" and owner["prm_probe_cut_answer"] == "07_reward_diagnostics"
    rows = counted(METRICS, statuses, STAGES)
    assert len(rows) == 14 and len({v["check"] for _, v in rows}) == 14  # of 27 rows: 2 + 2 + 3 + 8 + 1 + 11
    assert [v["status"] for _, v in rows].count("warn") == 2  # 07's step_format and prm_probe_commute
    # 07 stale: its checks count in the latest current stage that records them, 05's gate for the probes
    statuses["07_reward_diagnostics"] = {"status": "stale"}
    owner = owners(METRICS, statuses, STAGES)
    assert owner["step_format"] == "03_sft" and owner["prm_probe_cut_answer"] == "05_ppo"
    assert "kl_blowup" not in owner  # only 07 records it


def test_figures_never_show_raw_braces():
    assert fmt({}) == "none" and fmt([]) == "none" and fmt("") == "none" and fmt(None) == "—"
    assert fmt({"timeout": 3, "connection": {"n": 1}}) == "timeout: 3; connection: n: 1"
    assert fmt(["tensorboard", "wandb"]) == "tensorboard, wandb" and fmt([0.2, 0.8]) == "[0.2, 0.8]"
    cell = value_cell({"ppo": {}, "sft": {}})
    assert "{" not in cell and cell.count("none") == 2
    rows = value_cell([{"id": "a", "n": 1}, {"id": "b", "n": 2}])
    assert "<th>id</th><th>n</th>" in rows and "[" not in rows


def test_failures_table_one_row_per_cause_with_its_count_and_example():
    failures = {"total": 400, "failed": 130, "causes": {
        "connection": {"count": 100, "example": "e-1: connection error: refused"},
        "http 4xx": {"count": 30, "example": "e-9: http 404: model not found"}}}
    html = failures_table(failures, "../../docs")
    assert "130 of 400 requests failed, by cause" in html
    assert html.count("<tr>") == 3 and "e-9: http 404: model not found" in html
    assert 'href="../../docs/troubleshooting.md#failure-http-4xx"' in html
    assert failures_table({"total": 5, "failed": 0, "causes": {}}, None) == ""  # nothing failed: no table


def test_probe_rows_and_chart():
    rows = probe_rows(METRICS["07_reward_diagnostics"])
    assert [r["check"] for r in rows] == ["prm_probe_wrong_answer", "prm_probe_cut_answer", "prm_probe_commute"]
    svg = probe_chart(rows, 0.8, 0.4)
    assert svg.count('class="bar"') == 3 and "ok from 80%" in svg and "fail at 40% or below" in svg
    widths = [float(w) for w in re.findall(r'class="bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg)]
    assert widths[0] / widths[1] == pytest.approx(0.99 / 0.2, rel=0.01)  # bars in proportion to the share
    # 07's summary alone (no verdict kept whole) still draws, with the default lines
    assert len(probe_rows({"probes": {"irm_probe_unsolvable": {"moved_right": 0.5, "status": "warn"}}})) == 1


def test_png_width_reads_the_header(tmp_path):
    _png(tmp_path / "w.png", (0, 0, 0), size=(1210, 40))
    assert png_width((tmp_path / "w.png").read_bytes()) == 1210 and png_width(b"GIF89a") == 0


def test_a_run_stopped_by_failed_requests_shows_the_causes_in_the_box_and_its_section(tmp_path):
    metrics = {"00_setup": {"base_model": "m"}, "01_evolve": {"kept": 270, "failures": {
        "status": "stopped", "total": 400, "failed": 130, "causes": {"connection": {"count": 100, "example": "e-1: connection error: "
                                                                                         "refused"},
                                                "http 4xx": {"count": 30, "example": "e-9: http 404: no model"}}}}}
    stages = {"01_evolve": {"status": "stopped", "reason": "130 of 400 evolutions failed (32% > 10%; mostly "
                                                           "connection)"},
              **{s: {"status": "not run", "reason": ""} for s in STAGES[2:]}}
    d = _report(tmp_path, stages, metrics)
    dom = _dom(write_report(d).read_text())
    box = "".join(dom.box_text)
    assert "01_evolve stopped: 130 of 400 evolutions failed" in box and "mostly connection" in box
    assert "e-1: connection error: refused" in box and "rleif run params/tiny-cpu.toml --set ppo.lr=1e-4" in box
    assert "rleif check-api" in box  # the cause's row of the troubleshooting page: what to do
    assert any(h.endswith("troubleshooting.md#failure-connection") for h in dom.box_links)
    assert "".join(dom.text).count("e-9: http 404: no model") == 2  # the box's table and 01's section
    _check_links(d / "index.html", dom)


def test_a_stage_that_failed_beside_a_few_failed_requests_is_not_blamed_on_them(tmp_path):
    """04 failed (its traceback) while 2 of 500 requests had timed out, under the threshold: the box points at the
    traceback, not at the requests, and promises no retry."""
    metrics = {"00_setup": {"base_model": "m"}, "04_reward_models": {"failures": {
        "status": "ok", "total": 500, "failed": 2, "causes": {"timeout": {"count": 2, "example": "g1: timeout"}}}}}
    stages = {**{s: {"status": "ok", "reason": ""} for s in STAGES[:4]},
              "04_reward_models": {"status": "failed", "reason": "04_reward_models failed in cell 7: OutOfMemoryError"},
              **{s: {"status": "not run", "reason": ""} for s in STAGES[5:]}}
    d = _report(tmp_path, stages, metrics)
    box = "".join(_dom(write_report(d).read_text()).box_text)
    assert "OutOfMemoryError" in box and "causethe error above, from the executed notebook" in box
    assert "mostly timeout" not in box and "retries exactly the failed items" not in box


def test_a_healthy_run_says_where_to_go_from_the_demo(tmp_path):
    metrics = {s: m for s, m in METRICS.items() if s not in ("05_ppo", "07_reward_diagnostics")}
    d = _report(tmp_path, metrics=metrics)
    dom = _dom(write_report(d).read_text())
    box = "".join(dom.box_text)
    assert "No check failed or warned" in box and "Your own 7B run" in box
    targets = {Path(unquote(urlparse(h).path)).name for h in dom.box_links}
    assert {"your-own-7b-run.md", "wizardcoder.md", "notebooks"} <= targets
    _check_links(d / "index.html", dom)


# ------------------------------------------------------------------ headless Chromium


def test_chromium_the_box_links_counts_no_braces_and_the_probe_chart(tmp_path):
    _chromium()
    d = _report(tmp_path)
    _png(d / "figures" / "02_dedup_curves.png", GREEN_WIDE, size=(1210, 160))  # several panels: page width
    _png(d / "figures" / "02_dedup_similarity.png", (255, 0, 255), size=(700, 120))  # one panel: half of it
    dom, image = _render_dom(tmp_path, d, "checks", height=3200)
    text = "".join(dom.text)
    # the box: the first failing check, its cause and action from its troubleshooting row, linked there
    box = "".join(dom.box_text)
    assert box.startswith("What next") and "prm_probe_cut_answer" in box and "in 07_reward_diagnostics" in box
    assert "the PRM misses cut_answer" in box and "likely cause" in box and "prm_hard_negatives" in box
    assert any(h.endswith("troubleshooting.md#probe_cut_answer") for h in dom.box_links)
    assert "step_format warn" in box and "prm_probe_commute warn" in box  # the others, after it
    # every link resolves, every check name links to its entry
    linked = _check_links(d / "index.html", dom)
    assert {"probe_cut_answer", "step_format", "kl_blowup", "sft_vs_ppo", "evolve_failures"} <= set(linked)
    # each check counted once: 14 checks (1 fail, 2 warn, 11 ok), not the 27 rows the stages record
    assert "Checks, each counted once (in the latest current stage that records it): 11 ok 2 warn 1 fail." in text
    assert "counted in 07" in text and "counted in 05" not in text
    # no raw JSON: {} [] and {"...": ...} nowhere in what the page shows
    assert not re.search(r"[{}]|\[\]", text), re.findall(r".{30}(?:[{}]|\[\]).{30}", text)[:3]
    # the probes' chart beside their table, in 07 (where they are counted): a bar each
    assert dom.bars == 3 and "What the reward reads: the counterfactual probes" in text
    # a multi-panel figure at the page's width (1210 px wide: about 1150 px drawn), a single one at half of it
    wide = _bbox_width(image, GREEN_WIDE)
    assert wide >= 1100, f"the multi-panel figure is drawn {wide} px wide"
    assert 500 <= _bbox_width(image, (255, 0, 255)) <= 542  # 700 px drawn at most 540: two fit side by side


def _bbox_width(image, colour) -> int:
    import numpy as np

    pixels = np.asarray(image.convert("RGB"), dtype=int)
    cols = np.where((np.abs(pixels - np.array(colour)) <= 6).all(axis=-1).any(axis=0))[0]
    return int(cols.max() - cols.min() + 1) if len(cols) else 0


def test_chromium_a_run_terminated_by_sigterm_is_amber_and_the_box_says_rerun(tmp_path):
    _chromium()
    stages = {"05_ppo": {"status": "stopped", "reason": "terminated (SIGTERM)", "seconds": 40.0},
              "06_eval": {"status": "not run", "reason": "an earlier stage stopped"},
              "07_reward_diagnostics": {"status": "not run", "reason": "an earlier stage stopped"}}
    metrics = {s: m for s, m in METRICS.items() if s in STAGES[:5]}
    metrics["04_reward_models"] = _stage([_ok("irm_distribution"), _ok("low_ra_share")])
    d = _report(tmp_path, stages, metrics)
    dom, image = _render_dom(tmp_path, d, "stopped")
    page = write_report(d).read_text()
    assert 'data-stage="05_ppo" data-status="stopped"' in page
    box = "".join(dom.box_text)
    assert "05_ppo stopped: terminated (SIGTERM)" in box and "terminated before this stage completed" in box
    assert "rerun rleif run params/tiny-cpu.toml --set ppo.lr=1e-4" in box
    assert any(h.endswith("troubleshooting.md#stage-terminated") for h in dom.box_links)
    _check_links(d / "index.html", dom)
    # amber: the box, the stopped stage's pill and heading; nothing failed, so no red
    assert _share(image, AMBER, tolerance=4) > 0.0005, "the stopped stage is not amber on the page"
    assert _share(image, RED, tolerance=4) == 0.0
    assert json.loads((d / "run.json").read_text())["stages"]["05_ppo"]["status"] == "stopped"


def test_a_failed_stage_or_gate_leads_the_box_with_its_error_and_failing_checks(tmp_path):
    from test_report import fail_01

    d = fail_01(_report(tmp_path))
    box = "".join(_dom(write_report(d).read_text()).box_text)
    assert "01_evolve failed: 01_evolve failed in cell 4: EndpointError: 401 Unauthorized" in box
    assert "read the traceback" in box and "rerun rleif run params/tiny-cpu.toml" in box
    # the gate failed in 05: its failing checks are the cause, each linked to its row
    metrics = {**METRICS, "05_ppo": _stage([_ok("irm_distribution"), PROBES[1]])}
    d = _report(tmp_path, {"05_ppo": {"status": "failed", "reason": "cell 7: RewardHealthError: the reward-health "
                                                                    "gate failed, PPO not started"}}, metrics, "gate")
    dom = _dom(write_report(d).read_text())
    box = "".join(dom.box_text)
    assert "05_ppo failed: cell 7: RewardHealthError" in box and "the checks that failed: prm_probe_cut_answer" in box
    assert any(h.endswith("troubleshooting.md#probe_cut_answer") for h in dom.box_links)
    assert "01_evolve: 1 of 12 requests failed (mostly timeout)" in box  # an ok stage's failures, after it
    _check_links(d / "index.html", dom)


def test_without_the_kits_docs_the_page_has_no_docs_links(tmp_path, monkeypatch):
    import rleif_kit.pipeline.report as report

    monkeypatch.setattr(report, "docs_href", lambda _: None)
    dom = _dom(write_report(_report(tmp_path)).read_text())
    assert not [h for h in dom.links if ".md" in h] and "prm_probe_cut_answer" in "".join(dom.box_text)
