"""``reports/<run>/index.html`` (``pipeline/report.py``): every recorded stage with its verdict colours and its
figures, the headline, the loop, the "what next" box (a stage that failed or stopped, else the first failing or
warning check, else where to go from the demo) with its links into docs/troubleshooting.md, and the page as
headless Chromium renders it: red, amber and grey where they belong, the probes' chart, multi-panel figures at the
page's width.

Report folders built by hand under tmp_path (no pipeline runs); Chromium runs locally on a file:// URL with
background networking off, no network (it skips without Chromium, except under CI)."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from browser import chromium as _chromium
from browser import run_chromium as _run_chromium
from conftest import ROOT

from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import STAGES
from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report import gain_chart, write_report
from rleif_kit.pipeline.report_sections import STAGE_COLOURS, page_anchors

MAGENTA, CYAN = (255, 0, 255), (0, 200, 255)  # colours only the test figures have
RED = tuple(int(STATUS_COLORS["fail"][i:i + 2], 16) for i in (1, 3, 5))
AMBER = tuple(int(STATUS_COLORS["warn"][i:i + 2], 16) for i in (1, 3, 5))
GREEN_WIDE = (120, 190, 20)  # a colour only the test's wide figure has
DOC = ROOT / "docs" / "troubleshooting.md"


def _png(path, colour, size=(240, 120)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


def _verdict(check, status, numbers, thresholds, advice=""):
    return {"check": check, "status": status, "numbers": numbers, "thresholds": thresholds, "advice": advice,
            "source": ""}


@pytest.fixture
def report_dir(tmp_path):
    """A healthy run's report folder: every stage ok (04 skipped unchanged), verdicts with their details, the A/B,
    three figures, one of them saved twice; the preset moved a [diagnostics] threshold, with its reason."""
    d = tmp_path / "tiny-cpu"
    stages = {s: {"status": "ok", "reason": "not run yet", "seconds": 10.0 + i} for i, s in enumerate(STAGES)}
    stages["04_reward_models"] = {"status": "skipped", "reason": "complete and config unchanged", "seconds": 57.0}
    write_json_atomic(d / "run.json", {
        "run": "tiny-cpu", "params": "params/tiny-cpu.toml", "overrides": ["ppo.lr=1e-4"], "output_dir": "../run",
        "started": "2026-12-01T10:00:00+00:00", "finished": "2026-12-01T10:08:00+00:00", "stages": stages,
        "config_changes": [
            {"key": "diagnostics.low_ra_healthy_max", "value": 0.8, "default": 0.4, "override": False,
             "reason": "the tiny SFT model is wrong on most samples"},
            {"key": "ppo.lr", "value": 1e-4, "default": 1e-6, "override": True, "reason": ""}]})
    write_json_atomic(d / "metrics.json", {
        "00_setup": {"base_model": "/models/tiny", "endpoints_ok": 0},
        "01_evolve": {"kept": 1070, "eliminated": 130, "per_operator": {"deepen": {"kept": 176, "eliminated": 22}}},
        "02_dedup": {"kept": 1061, "removed_share": 0.27823,
                     "verdicts": {"kept_floor": "ok", "operator_share": "warn"}},
        "03_sft": {"accuracy_before": 0.0, "accuracy_after": 0.52, "examples": 30615, "steps": 500},
        "05_ppo": {"reward_last_fifth": 0.61, "verdicts": {"low_ra_share": "ok"},
                   "verdict_details": [_verdict("low_ra_share", "ok", {"share": 0.68}, {"healthy": [0.2, 0.8]},
                                                "the PRM calls 68% of answers bad")]},
        "06_eval": {"ab": {"arith": {"gain": 0.039, "ci95": [0.021, 0.057], "n": 1000}},
                    "verdicts": {"sft_vs_ppo_arith": "ok"}},
        "07_reward_diagnostics": {"verdicts": {"irm_distribution": "warn", "kl_blowup": "ok"}},
    })
    for stage in STAGES:
        (d / f"{stage}.ipynb").write_text('{"cells": []}')
    _png(d / "figures" / "02_dedup_similarity.png", MAGENTA)
    _png(d / "figures" / "05_ppo_curves.png", CYAN)
    _png(d / "figures" / "07_ab.png", CYAN)  # the same bytes as 05's: shown once
    _png(d / "figures" / "99_extra.png", (0, 0, 0))
    return d


def fail_01(d):
    """01_evolve failed in this run; every later stage keeps the figures of an older run (stale)."""
    run = json.loads((d / "run.json").read_text())
    run["stages"]["01_evolve"] = {"status": "failed", "seconds": 3.0,
                                  "reason": "01_evolve failed in cell 4: EndpointError: 401 Unauthorized"}
    for stage in STAGES[2:]:
        run["stages"][stage] = {"status": "stale", "reason": "01_evolve reran after its figures were recorded"}
    write_json_atomic(d / "run.json", run)
    metrics = json.loads((d / "metrics.json").read_text())
    metrics.pop("01_evolve")
    write_json_atomic(d / "metrics.json", metrics)
    return d


class _Page(HTMLParser):
    """Stage sections (their status, figure captions and verdict rows), images and links."""

    def __init__(self):
        super().__init__()
        self.sections, self.current, self.imgs, self.links = {}, None, [], []
        self._row = self._caption = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "stage" in (a.get("class") or "").split():
            self.current = a["data-stage"]
            self.sections[self.current] = {"status": a["data-status"], "figures": [], "verdicts": []}
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "a":
            self.links.append(a["href"])
        elif tag == "tr" and (a.get("class") or "").startswith("verdict") and self.current:
            self._row = a["class"].split()[1]
            self.sections[self.current]["verdicts"].append([self._row])
        elif tag == "figcaption":
            self._caption = True

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None
        self._row = None if tag == "tr" else self._row
        self._caption = None if tag == "figcaption" else self._caption

    def handle_data(self, data):
        if self.current and self._row:
            self.sections[self.current]["verdicts"][-1].append(data)
        if self.current and self._caption and data.strip(" ·"):
            self.sections[self.current]["figures"].append(data.strip(" ·"))


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


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


def test_a_healthy_run_shows_every_stage_its_verdict_numbers_and_the_headline(report_dir):
    out = write_report(report_dir)
    assert out == report_dir / "index.html"
    text = out.read_text()
    page = _parse(text)
    assert list(page.sections) == list(STAGES)
    assert {s: v["status"] for s, v in page.sections.items()}["04_reward_models"] == "skipped"
    assert all(v["status"] in ("ok", "skipped") for v in page.sections.values())
    assert page.sections["02_dedup"]["figures"] == ["02_dedup_similarity.png", "full size"]
    assert page.sections["07_reward_diagnostics"]["figures"] == []  # 07_ab.png is 05's plot again
    # a verdict row: check, status, its numbers, its thresholds, the preset's mark and reason, the advice
    row = page.sections["05_ppo"]["verdicts"][0]
    assert row[:5] == ["ok", "low_ra_share", "ok", "share = 0.68", "healthy = [0.2, 0.8]"]
    assert "preset: diagnostics.low_ra_healthy_max = 0.8 (kit default 0.4) — the tiny SFT model is wrong on " \
           "most samples" in row[5]
    assert [r[:3] for r in page.sections["02_dedup"]["verdicts"]] == [["ok", "kept_floor", "ok"],
                                                                      ["warn", "operator_share", "warn"]]
    # the headline: what went in and came out, PPO's gain with its interval, the wall time per stage
    assert "1,070 evolved instructions kept (130 eliminated)" in text
    assert "SFT: held-out accuracy 0.0% → <b>52.0%</b>" in text
    assert "PPO vs SFT on arith: <b>+3.9 points</b> (95% interval +2.1 to +5.7, n = 1000)" in text
    assert '<svg class="gain"' in text and "+3.9 [+2.1, +5.7] pts" in text
    assert "wall time of the current stages: 2m31s" in text  # 10 + 11 + 12 + 13 + 57 + 15 + 16 + 17 = 151 s
    # figures as tables, not JSON; contents bar; config moved from the defaults, the override marked
    assert "<th>removed_share</th><td><span class=\"num\">0.2782</span></td>" in text
    assert '<nav class="contents">' in text and 'href="#05_ppo"' in text
    assert "ppo.lr <em>(--set)</em>" in text
    assert "Checks, each counted once (in the latest current stage that records it):" in text  # 02 ok warn, 05 ok,
    # 06 ok, 07 warn ok: 4 ok, 2 warn
    assert '<span class="pill" style="background:#2e7d32">4 ok</span>' in text  # the counts in their colours
    assert '<span class="pill" style="background:#f9a825">2 warn</span>' in text
    # embedded figures, each linked at full size; no script
    assert len(page.imgs) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in page.imgs)
    assert "figures/05_ppo_curves.png" in page.links and "Other figures" in text and "<script" not in text


def test_a_failed_stage_is_red_with_its_error_and_stale_stages_grey_and_uncounted(report_dir):
    text = write_report(fail_01(report_dir)).read_text()
    page = _parse(text)
    statuses = {s: v["status"] for s, v in page.sections.items()}
    assert statuses == {"00_setup": "ok", "01_evolve": "failed", **{s: "stale" for s in STAGES[2:]}}
    assert "This stage failed.</b> 01_evolve failed in cell 4: EndpointError: 401 Unauthorized" in text
    assert text.count("These figures are stale: they are from an older run.</b> 01_evolve reran after") == 6
    assert "Stages: 1 ok, 1 failed, 6 stale." in text
    # the stale stages' verdicts are not counted as this run's; the headline takes no figure from them
    assert "records it): none (6 more on stale stages, not counted)." in text  # 2 + 1 + 1 + 2
    assert "PPO vs SFT" not in text and "no result yet" in text


def test_without_run_json_a_notebook_with_an_error_is_failed_and_a_missing_one_not_run(tmp_path):
    d = tmp_path / "r"
    write_json_atomic(d / "metrics.json", {"00_setup": {"base_model": "m"}})
    (d / "00_setup.ipynb").write_text('{"cells": []}')
    (d / "01_evolve.ipynb").write_text(json.dumps({"cells": [{"outputs": []}, {"outputs": [
        {"output_type": "error", "ename": "ValueError", "evalue": "no seeds"}]}]}))
    page = _parse(write_report(d).read_text())
    statuses = {s: v["status"] for s, v in page.sections.items()}
    assert statuses["00_setup"] == "recorded" and statuses["01_evolve"] == "failed"
    assert all(statuses[s] == "not run" for s in STAGES[2:])
    assert "cell 1: ValueError: no seeds" in write_report(d).read_text()


def test_page_adds_the_loop_summary_and_each_iteration(report_dir):
    write_json_atomic(report_dir / "loop_summary.json", {"iterations": [
        {"iteration": 1, "output_dir": "/o", "report_dir": "/r", "kept_instructions": 1061, "reward_last": 0.61},
        {"iteration": 2, "output_dir": "/o/iter-2", "report_dir": "/r/iter-2", "kept_instructions": 1200,
         "reward_last": 0.66}]})
    write_json_atomic(report_dir / "iter-2" / "metrics.json", {"02_dedup": {"kept": 1200, "verdicts": {"x": "ok"}}})
    _png(report_dir / "iter-2" / "figures" / "02_dedup_similarity.png", (1, 2, 3))
    (report_dir / "iter-2" / "02_dedup.ipynb").write_text("{}")
    run = json.loads((report_dir / "run.json").read_text())
    run["stages"]["iter-2/02_dedup"] = {"status": "ok", "reason": "", "seconds": 5.0}
    write_json_atomic(report_dir / "run.json", run)
    text = write_report(report_dir).read_text()
    assert "The loop: 2 iterations" in text
    assert re.search(r'<tr><td><span class="num">2</span></td><td><span class="num">1200</span></td>', text)
    assert text.index("Iteration 1") < text.index('id="iter-2"')
    page = _parse(text)
    assert "iter-2/02_dedup.ipynb" in page.links and len(page.imgs) == 4
    assert 'id="iter-2/02_dedup" data-stage="02_dedup" data-status="ok"' in text
    assert 'id="iter-2/03_sft" data-stage="03_sft" data-status="not run"' in text
    assert "latest iteration (of 2)" in text  # the headline reads iteration 2's 02_dedup
    assert "1,200 after dedup" in text


def _scorer_rows(text):
    """06's accuracy-per-scorer table as [[cell text, ...], ...] (the header row first)."""
    table = re.search(r'<table class="scorers">(.*?)</table>', text, re.S)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1))] if table else None


def test_eval_shows_accuracy_per_scorer_and_links_the_disagreement_file(report_dir):
    from rleif_kit.core.paths import RunPaths

    run = RunPaths(report_dir.parent / "run")  # run.json's output_dir, "../run" from the report folder
    gsm8k = {"n": 8, "accuracy": 0.5, "flexible_accuracy": 0.625, "compat_accuracy": 0.5,
             "math_verify_accuracy": 0.375, "math_verify_disagreements": 3,
             "scorers": {"strict": 0.5, "flexible": 0.625, "compat": 0.5, "math_verify": 0.375}}
    write_json_atomic(run.eval_summary, {"summary": {
        "sft": {"gsm8k": gsm8k, "math": {"n": 4, "accuracy": 0.25, "compat_accuracy": 0.25,
                                          "math_verify_accuracy": 0.25, "math_verify_disagreements": 0},
                "arith": {"n": 10, "accuracy": 0.9, "steps_ok": 0.8}}},  # one scorer only: no row
        "math_verify": {"version": "0.9.0", "disagreements": "math_verify_disagreements.jsonl", "n": 3}})
    run.math_verify_disagreements.write_text('{"id": "a"}\n' * 3)
    text = write_report(report_dir).read_text()
    section = text[text.index('id="06_eval"'):text.index('id="07_reward_diagnostics"')]
    assert _scorer_rows(section) == [
        ["model", "benchmark", "strict (headline)", "flexible", "compat", "math-verify",
         "disagreements (math-verify vs strict)"],
        ["sft", "gsm8k", "50.0%", "62.5%", "50.0%", "37.5%", "3"],  # 4/8, 5/8, 4/8, 3/8
        ["sft", "math", "25.0%", "—", "25.0%", "25.0%", "0"]]
    href = "../run/06_eval/math_verify_disagreements.jsonl"
    assert f'<a href="{href}">3</a>' in section and f'<a href="{href}">math_verify_disagreements.jsonl</a>' in section
    assert "math-verify 0.9.0 and strict disagree" in section and href in _parse(text).links
    # the run directory out of reach (the report folder copied alone): the accuracies metrics.json records
    shutil.rmtree(run.output_dir)
    metrics = json.loads((report_dir / "metrics.json").read_text())
    metrics["06_eval"].update(accuracy={"sft": {"gsm8k": 0.5, "arith": 0.9}},
                              compat_accuracy={"sft": {"gsm8k": 0.5}}, flexible_accuracy={"sft": {"gsm8k": 0.625}})
    write_json_atomic(report_dir / "metrics.json", metrics)
    text = write_report(report_dir).read_text()
    assert _scorer_rows(text)[1:] == [["sft", "gsm8k", "50.0%", "62.5%", "50.0%", "—", "—"]]
    assert "disagreements.jsonl" not in text
    # no benchmark with a second scorer: no table
    metrics["06_eval"].pop("compat_accuracy"), metrics["06_eval"].pop("flexible_accuracy")
    write_json_atomic(report_dir / "metrics.json", metrics)
    assert _scorer_rows(write_report(report_dir).read_text()) is None


# ------------------------------------------------------------------ the run's words and 06's results by family

CODE_FAMILIES = {"tiny_code": [
    {"family": "range", "n": {"sft": 2, "ppo": 2}, "right": {"sft": 0, "ppo": 2},
     "failures": {"sft": {"wrong value": 2}, "ppo": {}}},
    {"family": "slice", "n": {"sft": 2, "ppo": 2}, "right": {"sft": 0, "ppo": 0},
     "failures": {"sft": {"wrong value": 2}, "ppo": {"syntax error": 2}}},
    {"family": "all", "n": {"sft": 4, "ppo": 4}, "right": {"sft": 0, "ppo": 2},
     "failures": {"sft": {"wrong value": 4}, "ppo": {"syntax error": 2}}}]}
PROGRAM = "def f(a, b):\n    return sum(range(a, b))  # <the off-by-one>"


def _table_rows(text, cls):
    """A table of the page as [[cell text, ...], ...] (the header row first), or None."""
    table = re.search(rf'<table class="{cls}">(.*?)</table>', text, re.S)
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.group(1), re.S)] if table else None


def code_run(report_dir):
    """The healthy run made a code run: tiny_code's world and r = rI · rV, 06 with its breakdown by family, the
    scorers a code benchmark does not have recorded empty (as 06 recorded them before), a wrong program."""
    run = json.loads((report_dir / "run.json").read_text())
    run["config_changes"] += [{"key": "base.world", "value": "tiny_code", "default": "math", "override": False,
                               "reason": ""},
                              {"key": "ppo.reward_formula", "value": "rI * rV", "default": "rI * rA",
                               "override": False, "reason": "the execution reward"}]
    write_json_atomic(report_dir / "run.json", run)
    metrics = json.loads((report_dir / "metrics.json").read_text())
    metrics["06_eval"] = {
        "ab": {"tiny_code": {"gain": 0.5, "ci95": [0.1, 0.9], "n": 4}}, "verdicts": {"sft_vs_ppo_tiny_code": "ok"},
        "accuracy": {"sft": {"tiny_code": 0.0}, "ppo": {"tiny_code": 0.5}}, "n_items": {"sft": {"tiny_code": 4},
                                                                                       "ppo": {"tiny_code": 4}},
        "flexible_accuracy": {"sft": {}, "ppo": {}}, "compat_accuracy": {"sft": {}, "ppo": {}},
        "math_verify_accuracy": {}, "math_verify_disagreements": {"sft": {}, "ppo": {}}, "families": CODE_FAMILIES,
        "wrong_answers": [{"model": "sft", "benchmark": "tiny_code", "id": "t1#0", "gold": None,
                           "failure": "wrong value", "response": PROGRAM}]}
    write_json_atomic(report_dir / "metrics.json", metrics)
    return report_dir


def test_a_code_run_names_its_world_and_formula_and_shows_its_results_by_family(report_dir):
    text = write_report(code_run(report_dir)).read_text()
    top = text[:text.index('id="next"')]
    assert "World <b>tiny_code</b>" in top and "<code>r = rI · rV</code>" in top and "r = rI · rA" not in text
    assert "<b>rV</b> the task's tests, run in the sandbox" in top and "Scored by pass@1 on held-out tasks" in top
    # the one-glance results, above the box: pass@1 per model and family, PPO's change in points
    assert top.index('id="results"') < text.index('id="next"') and 'href="#results"' in text
    assert _table_rows(top, "results") == [
        ["benchmark", "family", "sft pass@1", "ppo pass@1", "change (points)"],
        ["tiny_code", "range", "0/2 (0.0%)", "2/2 (100.0%)", "100"],  # 0/2 -> 2/2
        ["tiny_code", "slice", "0/2 (0.0%)", "0/2 (0.0%)", "0"],
        ["tiny_code", "all", "0/4 (0.0%)", "2/4 (50.0%)", "50"]]  # 0/4 -> 2/4
    section = text[text.index('id="06_eval"'):text.index('id="07_reward_diagnostics"')]
    assert _table_rows(section, "families")[2] == ["tiny_code", "slice", "0/2 (0.0%)", "0/2 (0.0%)", "0",
                                                   "wrong value 2", "syntax error 2"]
    # scorers a code benchmark does not have: no row, no table; the gold no row has: no column
    assert not re.search(r"<th>(flexible_accuracy|compat_accuracy|math_verify\w*|families)</th>", section)
    assert _scorer_rows(section) is None and "<th>gold</th>" not in section
    # the wrong program as code: escaped, its line break and indent kept, whole
    assert "<pre>def f(a, b):\n    return sum(range(a, b))  # &lt;the off-by-one&gt;</pre>" in section
    # the stages and the headline in the run's words
    assert "PPO on the reward <code>r = rI · rV</code>" in text
    assert "SFT: held-out pass@1 0.0% → <b>52.0%</b>" in text
    assert 'aria-label="PPO minus SFT pass@1"' in text


def test_without_run_json_or_with_a_world_it_cannot_load_the_page_has_no_words():
    from rleif_kit.pipeline.report import report_words

    assert report_words({}) is None
    assert report_words({"config_changes": [{"key": "base.world", "value": "no_such_pkg.world"}]}) is None
    words = report_words({"config_changes": [{"key": "base.world", "value": "arith"}]})
    assert (words.world, words.shown, words.score) == ("arith", "r = rI · rA", "accuracy")  # the kit's defaults


def test_a_code_runs_next_steps_start_with_the_wizardcoder_arm(report_dir):
    metrics = json.loads((report_dir / "metrics.json").read_text())
    for stage in ("02_dedup", "07_reward_diagnostics"):
        metrics[stage]["verdicts"] = {k: "ok" for k in metrics[stage]["verdicts"]}  # a healthy run: the demo box
    write_json_atomic(report_dir / "metrics.json", metrics)
    box = lambda t: t[t.index('id="next"'):t.index('id="headline"')]  # noqa: E731
    math_box = box(write_report(report_dir).read_text())
    assert math_box.index("Your own 7B run") < math_box.index("The WizardCoder arm")
    code_run(report_dir)
    code_box = box(write_report(report_dir).read_text())
    assert code_box.index("The WizardCoder arm") < code_box.index("Your own 7B run")


def test_a_math_run_keeps_its_scorer_rows_and_its_words(report_dir):
    metrics = json.loads((report_dir / "metrics.json").read_text())
    metrics["06_eval"].update(accuracy={"sft": {"gsm8k": 0.5}, "ppo": {"gsm8k": 0.75}},
                              n_items={"sft": {"gsm8k": 8}, "ppo": {"gsm8k": 8}},
                              compat_accuracy={"sft": {"gsm8k": 0.5}, "ppo": {"gsm8k": 0.625}},
                              flexible_accuracy={"sft": {"gsm8k": 0.625}, "ppo": {}})
    write_json_atomic(report_dir / "metrics.json", metrics)
    text = write_report(report_dir).read_text()
    section = text[text.index('id="06_eval"'):text.index('id="07_reward_diagnostics"')]
    assert "<th>compat_accuracy</th>" in section and "<th>flexible_accuracy</th>" in section
    assert sorted(r[:3] for r in _scorer_rows(section)[1:]) == [["ppo", "gsm8k", "75.0%"], ["sft", "gsm8k", "50.0%"]]
    # recorded before families were: each benchmark's one row out of its accuracy and n, no family column
    assert _table_rows(text, "results") == [["benchmark", "sft accuracy", "ppo accuracy", "change (points)"],
                                            ["gsm8k", "4/8 (50.0%)", "6/8 (75.0%)", "25"]]  # 0.5 x 8, 0.75 x 8
    assert "<code>r = rI · rA</code>" in text and "r = rI · rV" not in text and _table_rows(text, "families") is None


def test_a_stale_eval_reads_no_summary_from_the_run(report_dir):
    from rleif_kit.core.paths import RunPaths

    run = RunPaths(report_dir.parent / "run")
    write_json_atomic(run.eval_summary, {"summary": {"ppo": {"gsm8k": {"n": 2, "accuracy": 1.0,
                                                                       "compat_accuracy": 1.0}}}})
    status = json.loads((report_dir / "run.json").read_text())
    status["stages"]["06_eval"] = {"status": "stale", "reason": "05_ppo reran after its figures were recorded"}
    write_json_atomic(report_dir / "run.json", status)
    assert _scorer_rows(write_report(report_dir).read_text()) is None  # summary.json is not these figures' run


def test_gain_chart_by_hand():
    # the gain chart: nothing without a gain; the interval's ends written in points
    assert gain_chart({}) == "" and "-1.5, +3.3" in gain_chart({"gsm8k": {"gain": 0.009, "ci95": [-0.015, 0.033]}})


# ------------------------------------------------------------------ the what-next box


def test_a_run_stopped_by_failed_requests_shows_the_causes_in_the_box_and_its_section(tmp_path):
    metrics = {"00_setup": {"base_model": "m"}, "01_evolve": {"kept": 270, "failures": {
        "status": "stopped", "total": 400, "failed": 130, "causes": {
            "connection": {"count": 100, "example": "e-1: connection error: refused"},
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


def test_a_failed_stage_or_gate_leads_the_box_with_its_error_and_failing_checks(tmp_path):
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


# ------------------------------------------------------------------ what a model, a user or a file wrote is text


def hostile(where: str) -> str:
    """Text that would be markup, a table cell's end or a template if the page took it as anything but text."""
    return f'<script>document.title = "{where}"</script></td><td>{{{{ 7*7 }}}} {{% raw %}} <b>{where}</b>'


FIELDS = ("completion", "judge reply", "stage error", "config value", "config reason", "advice", "override",
          "run name", "A/B n")


def hostile_run(tmp_path):
    """A run whose every written field holds ``hostile``: a completion (06's wrong answers, a program of several
    lines), a judge's reply (01's failed request), a stage's error, a config value and reason, a check's advice, a
    ``--set``, the run's name, and the A/B's n (a figure metrics.json holds)."""
    metrics = json.loads(json.dumps(METRICS))
    metrics["01_evolve"]["failures"]["causes"]["timeout"]["example"] = hostile("judge reply")
    metrics["06_eval"]["ab"]["arith"]["n"] = hostile("A/B n")
    metrics["06_eval"]["wrong_answers"] = [{"model": "sft", "id": "t1", "response": hostile("completion")
                                            + "\n    return x"}]
    step_format = metrics["07_reward_diagnostics"]["verdict_details"][1]
    assert step_format["check"] == "step_format"
    step_format["advice"] = hostile("advice")
    d = _report(tmp_path, {"03_sft": {"status": "failed", "reason": hostile("stage error")}}, metrics)
    run = json.loads((d / "run.json").read_text())
    run.update({"run": hostile("run name"), "overrides": [hostile("override")]})
    run["config_changes"].append({"key": "evol_instruct.judge_prompt", "value": hostile("config value"),
                                  "default": "", "override": True, "reason": hostile("config reason")})
    write_json_atomic(d / "run.json", run)
    return d


class _Cells(HTMLParser):
    """The elements a page holds (by tag), its text (the title's too) and each table's rows as cell counts."""

    def __init__(self):
        super().__init__()
        self.tags, self.text, self.tables, self._open = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self._open.append((dict(attrs).get("class"), []))
            self.tables.append(self._open[-1])
        elif tag == "tr" and self._open:
            self._open[-1][1].append(0)
        elif tag in ("td", "th") and self._open and self._open[-1][1]:
            self._open[-1][1][-1] += 1

    def handle_endtag(self, tag):
        if tag == "table" and self._open:
            self._open.pop()

    def handle_data(self, data):
        self.text.append(data)


def _cells(html: str) -> _Cells:
    page = _Cells()
    page.feed(html)
    return page


def assert_written_text_is_text(html: str):
    """Each hostile field shown as typed, no script element, and every row of the tables that hold them as wide as
    their header."""
    page = _cells(html)
    text = "".join(page.text)
    assert "script" not in page.tags, "a written field reached the page as markup"
    missing = [f for f in FIELDS if hostile(f) not in text]
    assert missing == [], f"not shown as typed: {missing}"
    assert text.count("{{ 7*7 }}") >= len(FIELDS) and "{% raw %}" in text
    widths = {cls: {n for n in rows} for cls, rows in page.tables if cls in ("config", "verdicts", "failures")}
    assert widths == {"config": {4}, "verdicts": {5}, "failures": {3}}, widths


def test_what_a_model_a_user_or_a_file_wrote_reaches_the_page_as_text(tmp_path):
    html = write_report(hostile_run(tmp_path)).read_text()
    assert_written_text_is_text(html)
    assert "<pre>&lt;script&gt;" in html  # the completion of several lines: code, escaped, whole
    assert "49" not in html.split("<title>")[1].split("</title>")[0]  # the run's name as typed, never evaluated


# ------------------------------------------------------------------ headless Chromium


def _share(image, colour, tolerance=8) -> float:
    """Share of the screenshot's pixels within ``tolerance`` of ``colour`` on every channel."""
    import numpy as np

    pixels = np.asarray(image.convert("RGB"), dtype=int)
    return float((np.abs(pixels - np.array(colour)) <= tolerance).all(axis=-1).mean())


def _render(tmp_path, report_dir, name):
    from PIL import Image

    url = write_report(report_dir).as_uri()
    dom = _run_chromium(tmp_path, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    shot = tmp_path / f"{name}.png"
    result = _run_chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1200,2400")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    return _parse(dom.stdout), Image.open(shot)  # the DOM as the browser built it, and what it drew


def test_chromium_renders_a_healthy_run_green_with_its_figures(report_dir, tmp_path):
    page, image = _render(tmp_path, report_dir, "healthy")
    assert list(page.sections) == list(STAGES) and all(v["status"] in ("ok", "skipped")
                                                       for v in page.sections.values())
    assert len(page.imgs) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in page.imgs)
    # the figures were decoded and drawn (240x120 of 1200x2400 is 1%), green pills, and no red anywhere
    green = tuple(int(STATUS_COLORS["ok"][i:i + 2], 16) for i in (1, 3, 5))
    assert _share(image, MAGENTA) > 0.003 and _share(image, green) > 0.0005
    assert _share(image, RED, tolerance=4) == 0.0, "red on a healthy run's page"


def test_chromium_renders_a_failed_stage_red_and_stale_stages_grey(report_dir, tmp_path):
    page, image = _render(tmp_path, fail_01(report_dir), "failed")
    assert page.sections["01_evolve"]["status"] == "failed"
    assert [page.sections[s]["status"] for s in STAGES[2:]] == ["stale"] * 6
    grey = tuple(int(STAGE_COLOURS["stale"][i:i + 2], 16) for i in (1, 3, 5))
    assert _share(image, RED, tolerance=4) > 0.0005, "the failed stage is not red on the page"
    assert _share(image, grey, tolerance=4) > 0.0005, "the stale stages are not grey on the page"


def test_without_chromium_the_browser_test_skips_except_under_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="headless Chromium not found"):
        _chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        _chromium()


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


def test_chromium_builds_no_element_from_what_a_run_wrote(tmp_path):
    """The browser's own DOM: no script element, no extra cell, each field's text as typed."""
    _chromium()
    d = hostile_run(tmp_path)
    dom = _run_chromium(tmp_path, write_report(d).as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert_written_text_is_text(dom.stdout)
