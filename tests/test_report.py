"""``reports/<run>/index.html``: every recorded stage with its verdict colours and its figures, and the
page as headless Chromium renders it. On disk under tmp_path; Chromium runs locally on a file:// URL
with background networking off, no network."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

from rleif_kit.core.records import write_json_atomic
from rleif_kit.pipeline.report import VERDICT_COLOURS, write_report

MAGENTA, CYAN = (255, 0, 255), (0, 200, 255)  # colours only the test figures have


def _png(path, colour, size=(240, 120)):
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, colour).save(path)


@pytest.fixture
def report_dir(tmp_path):
    """A run's report folder: four stages recorded (verdicts as statuses and as dicts), three figures."""
    d = tmp_path / "tiny-cpu"
    write_json_atomic(d / "metrics.json", {
        "00_setup": {"base_model": "/models/tiny", "endpoints_ok": 0},
        "02_dedup": {"kept": 1061, "removed_share": 0.27823,
                     "verdicts": {"kept_floor": "ok", "operator_share": "warn"}},
        "05_ppo": {"reward_last_fifth": 0.61, "verdicts": {"low_ra_share": "fail"}},
        "07_reward_diagnostics": {"verdicts": {"irm_distribution": {"status": "warn", "numbers": {"mean": 0.83}}}},
    })
    _png(d / "figures" / "02_dedup_similarity.png", MAGENTA)
    _png(d / "figures" / "05_ppo_curves.png", CYAN)
    _png(d / "figures" / "99_extra.png", (0, 0, 0))
    (d / "02_dedup.ipynb").write_text("{}")
    return d


class _Page(HTMLParser):
    """Stage sections with the figure captions and verdict badges inside each."""

    def __init__(self):
        super().__init__()
        self.sections, self.current, self.imgs, self.links = {}, None, [], []
        self._in_badge = self._in_caption = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "stage" in (a.get("class") or ""):
            self.current = a["data-stage"]
            self.sections[self.current] = {"figures": [], "verdicts": []}
        elif tag == "img":
            self.imgs.append(a)
        elif tag == "a":
            self.links.append(a["href"])
        elif tag == "span" and (a.get("class") or "").startswith("verdict"):
            self._in_badge = a["class"].split()[1]
        elif tag == "figcaption":
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "section":
            self.current = None
        self._in_badge = None if tag == "span" else self._in_badge
        self._in_caption = None if tag == "figcaption" else self._in_caption

    def handle_data(self, data):
        if self.current and self._in_badge:
            self.sections[self.current]["verdicts"].append((data, self._in_badge))
        if self.current and self._in_caption:
            self.sections[self.current]["figures"].append(data)


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    return page


def test_page_lists_every_stage_with_verdict_colours_and_its_figures(report_dir):
    out = write_report(report_dir)
    assert out == report_dir / "index.html"
    text = out.read_text()
    page = _parse(text)
    assert list(page.sections) == ["00_setup", "02_dedup", "05_ppo", "07_reward_diagnostics"]
    assert page.sections["02_dedup"]["figures"] == ["02_dedup_similarity.png"]
    assert page.sections["05_ppo"]["figures"] == ["05_ppo_curves.png"]
    assert page.sections["02_dedup"]["verdicts"] == [("kept_floor: ok", "ok"), ("operator_share: warn", "warn")]
    assert page.sections["05_ppo"]["verdicts"] == [("low_ra_share: fail", "fail")]
    assert page.sections["07_reward_diagnostics"]["verdicts"] == [("irm_distribution: warn", "warn")]
    for status, colour in VERDICT_COLOURS.items():  # each class has its colour: green, amber, red
        assert f".verdict.{status} {{ background: {colour}; }}" in text
    assert "1 ok, 2 warn, 1 fail" in text
    assert "<th>removed_share</th><td>0.2782</td>" in text and "<th>kept</th><td>1061</td>" in text
    # self-contained: three embedded figures (the unmatched one under "Other figures"), no file links
    assert len(page.imgs) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in page.imgs)
    assert "Other figures" in text and page.links == ["02_dedup.ipynb"]
    assert "<script" not in text


def test_page_adds_the_loop_summary_and_each_iteration(report_dir):
    write_json_atomic(report_dir / "loop_summary.json", {"iterations": [
        {"iteration": 1, "output_dir": "/o", "report_dir": "/r", "kept_instructions": 1061, "reward_last": 0.61},
        {"iteration": 2, "output_dir": "/o/iter-2", "report_dir": "/r/iter-2", "kept_instructions": 1200,
         "reward_last": 0.66}]})
    write_json_atomic(report_dir / "iter-2" / "metrics.json", {"02_dedup": {"kept": 1200, "verdicts": {"x": "ok"}}})
    _png(report_dir / "iter-2" / "figures" / "02_dedup_similarity.png", MAGENTA)
    (report_dir / "iter-2" / "02_dedup.ipynb").write_text("{}")
    text = write_report(report_dir).read_text()
    assert "The loop: 2 iterations" in text
    assert re.search(r"<tr><td>2</td><td>1200</td><td>0.66</td></tr>", text)
    assert text.index("Iteration 1") < text.index('id="iter-2"')
    page = _parse(text)
    assert "iter-2/02_dedup.ipynb" in page.links and len(page.imgs) == 4


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


def test_chromium_renders_the_page_with_its_figures(report_dir, tmp_path):
    from PIL import Image

    url = write_report(report_dir).as_uri()
    dom = _run_chromium(tmp_path, url, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    page = _parse(dom.stdout)  # the DOM as the browser built it
    assert list(page.sections) == ["00_setup", "02_dedup", "05_ppo", "07_reward_diagnostics"]
    assert len(page.imgs) == 3 and all(i["src"].startswith("data:image/png;base64,") for i in page.imgs)

    shot = tmp_path / "page.png"
    result = _run_chromium(tmp_path, url, f"--screenshot={shot}", "--window-size=1200,2000")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    image = Image.open(shot)
    # the figures were decoded and drawn (240x120 each of 1200x2000 is 1.2%), and the badges are coloured
    assert _share(image, MAGENTA) > 0.005 and _share(image, CYAN) > 0.005
    for status, colour in VERDICT_COLOURS.items():
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        assert _share(image, rgb) > 0.0002, f"no {status} badge ({colour}) on the page"


def test_without_chromium_the_browser_test_skips_except_under_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="headless Chromium not found"):
        _chromium()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true requires it"):
        _chromium()
