"""What a learner sees of a run: the report page as headless Chromium built it (its DOM and its text), and the
executed notebooks' text.

Shared by ``test_report.py`` (pages of made-up runs) and the preset runs (``test_pipeline.py``, ``test_tiny_code.py``,
``test_tiny_math.py``, ``test_toy_world.py``): each renders its own ``reports/<run>/index.html`` and asserts that it
speaks the run's world and reward (:func:`assert_page_speaks_its_world`).
"""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    """Chromium's path; skipped without it, except under CI=true (``.ci/run`` installs it), where it fails."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        reason = "headless Chromium not found (Debian: apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(f"{reason}, and CI=true requires it")
        pytest.skip(reason)
    return exe


def run_chromium(tmp_path: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--disable-background-networking", "--disable-dev-shm-usage",
             "--no-first-run", "--hide-scrollbars", f"--user-data-dir={tmp_path / 'chromium-profile'}"]
    if os.geteuid() == 0:
        flags.append("--no-sandbox")  # Chromium refuses to run as root with its sandbox
    return subprocess.run([chromium(), *flags, *args, url], capture_output=True, text=True, timeout=120)


def rendered_dom(tmp_path: Path, index: Path) -> str:
    """The DOM Chromium built from ``index`` (serialised back to HTML)."""
    dom = run_chromium(tmp_path, index.as_uri(), "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return dom.stdout


def visible_text(dom: str) -> str:
    """The page's text as a reader sees it: no style or script, tags gone, entities decoded, spaces collapsed."""
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", dom, flags=re.S | re.I)
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def row_labels(dom: str) -> set[str]:
    """The first cell of every table row of the page: what each row is about."""
    rows = re.findall(r"<tr[^>]*>\s*<t[hd][^>]*>(.*?)</t[hd]>", dom, flags=re.S)
    return {" ".join(html.unescape(re.sub(r"<[^>]+>", " ", c)).split()) for c in rows}


SCORER_ROWS = ("flexible", "compat", "math-verify", "math_verify")  # 06's scorers of GSM8k / MATH answers


def assert_page_speaks_its_world(tmp_path: Path, reports: Path, world: str, formula: str,
                                 never: tuple[str, ...] = (), scorers: bool = False) -> str:
    """Render ``reports/index.html`` in Chromium: the page names its ``world`` and its reward ``formula`` (as shown,
    ``r = rI · rV``), never says any of ``never`` (case-insensitive), and has 06's scorer rows only where ``scorers``
    (a math benchmark's flexible / compat / math-verify readings). Returns the visible text."""
    dom = rendered_dom(tmp_path, reports / "index.html")
    text = visible_text(dom)
    assert world in text and formula in text, (world, formula, text[:600])
    other = {"r = rI · rA", "r = rI · rV"} - {formula}
    assert not [f for f in other if f in text], f"the page shows another formula than {formula}"
    said = [w for w in never if w.lower() in text.lower()]
    assert said == [], [text[max(0, text.lower().index(w.lower()) - 120):text.lower().index(w.lower()) + 80]
                         for w in said]
    scorer_rows = {label for label in row_labels(dom) if label.lower().startswith(SCORER_ROWS)}
    assert bool(scorer_rows) == scorers, scorer_rows
    return text


def notebooks_text(reports: Path) -> dict[str, str]:
    """What a learner reads in each executed notebook of ``reports``: its markdown and every output (streams,
    plain text, markdown, HTML), not the code cells' source."""
    import json

    out = {}
    for path in sorted(reports.glob("[0-9][0-9]_*.ipynb")):
        parts = []
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                parts.append("".join(cell["source"]))
            for o in cell.get("outputs", []):
                parts.append("".join(o.get("text", "")))
                for kind in ("text/plain", "text/markdown", "text/html"):
                    parts.append("".join((o.get("data") or {}).get(kind, "")))
        out[path.stem] = html.unescape("\n".join(parts))
    return out


def mentions(texts: dict[str, str], word: str, width: int = 100) -> list[str]:
    """``<notebook>: ...context...`` for each place ``word`` (case-insensitive) appears in ``texts``."""
    found = []
    for name, text in texts.items():
        for m in re.finditer(re.escape(word), text, flags=re.I):
            found.append(f"{name}: {' '.join(text[max(0, m.start() - width):m.end() + width].split())}")
    return found
