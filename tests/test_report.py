"""``reports/<run>/index.html``: every recorded stage with its verdict colours and its figures, and the
page as headless Chromium renders it. On disk under tmp_path; Chromium runs locally on a file:// URL
with background networking off, no network."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import STAGES
from rleif_kit.core.verdict import STATUS_COLORS
from rleif_kit.pipeline.report import write_report
from rleif_kit.pipeline.report_parts import STAGE_COLOURS, gain_chart, preset_marks, value_cell

MAGENTA, CYAN = (255, 0, 255), (0, 200, 255)  # colours only the test figures have
RED = tuple(int(STATUS_COLORS["fail"][i:i + 2], 16) for i in (1, 3, 5))


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


def test_a_stale_eval_reads_no_summary_from_the_run(report_dir):
    from rleif_kit.core.paths import RunPaths

    run = RunPaths(report_dir.parent / "run")
    write_json_atomic(run.eval_summary, {"summary": {"ppo": {"gsm8k": {"n": 2, "accuracy": 1.0,
                                                                       "compat_accuracy": 1.0}}}})
    status = json.loads((report_dir / "run.json").read_text())
    status["stages"]["06_eval"] = {"status": "stale", "reason": "05_ppo reran after its figures were recorded"}
    write_json_atomic(report_dir / "run.json", status)
    assert _scorer_rows(write_report(report_dir).read_text()) is None  # summary.json is not these figures' run


def test_parts_by_hand():
    # a moved key marks the checks whose thresholds it sets, by name: a probe's ok_at of 0.8 is not the moved
    # low_ra_healthy_max of 0.8, and score_mean_min's 0.2 is not low_ra_share's band end of 0.2
    changed = {k: {"key": k, "value": v} for k, v in (("diagnostics.low_ra_healthy_max", 0.8),
                                                       ("diagnostics.score_mean_min", 0.2), ("ppo.lr", 0.2))}
    assert [c["key"] for c in preset_marks("low_ra_share", changed)] == ["diagnostics.low_ra_healthy_max"]
    assert [c["key"] for c in preset_marks("prm_distribution", changed)] == ["diagnostics.score_mean_min"]
    assert preset_marks("prm_probe_early_stop", changed) == [] and preset_marks("kl_blowup", changed) == []
    # a dict of dicts is one table with a column per inner key, never JSON
    cell = value_cell({"a": {"kept": 1, "x": 2.5}, "b": {"kept": 3}})
    assert "<th>kept</th><th>x</th>" in cell and "<td>2.5</td>" in cell and "<td>—</td>" in cell
    # the gain chart: nothing without a gain; the interval's ends written in points
    assert gain_chart({}) == "" and "-1.5, +3.3" in gain_chart({"gsm8k": {"gain": 0.009, "ci95": [-0.015, 0.033]}})
    assert set(STAGE_COLOURS) >= {"ok", "skipped", "failed", "stale", "not run", "stopped"}


# ------------------------------------------------------------------ headless Chromium


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = "headless Chromium not found (Debian: apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"{reason}, and CI=true requires it")
        pytest.skip(reason)
    return exe


def _run_chromium(tmp_path, url: str, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage",
             "--no-first-run", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'chromium-profile'}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return subprocess.run([_chromium(), *flags, *args, url], capture_output=True, text=True, timeout=120)


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


def test_every_threshold_key_names_a_config_key():
    from dataclasses import fields

    from rleif_kit.checks.threshold_keys import THRESHOLD_KEYS, threshold_keys
    from rleif_kit.core.config import SECTIONS

    known = {f"{s}.{f.name}" for s, cls in SECTIONS.items() for f in fields(cls)}
    assert {k for keys in THRESHOLD_KEYS.values() for k in keys} <= known
    assert threshold_keys("irm_probe_unsolvable") == ("diagnostics.probe_ok", "diagnostics.probe_fail")
    assert threshold_keys("sft_vs_ppo_arith") == ("diagnostics.ab_min_gain",) and threshold_keys("config") == ()
