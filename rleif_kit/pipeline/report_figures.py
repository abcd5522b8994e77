"""The report's plots: each PNG of ``reports/<run>/figures/`` embedded once, linked to its file.

A plot of several panels side by side (the PPO curves, the reward-health curves, the score histograms) is shown at
its own size up to the page's width, where its labels read as they do in the notebook; a single panel at half the
width, two side by side. Either one opens at full size on a click (its file).
"""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

from rleif_kit.pipeline.report_parts import esc

WIDE_PX = 900  # a figure this wide (several panels side by side) gets the page's whole width, not half of it


def png_width(raw: bytes) -> int:
    """A PNG's width in pixels from its header (0 when it is not a PNG)."""
    return int.from_bytes(raw[16:20], "big") if raw[:8] == b"\x89PNG\r\n\x1a\n" and len(raw) >= 24 else 0


def figure(path: Path, href: str) -> str:
    """The plot embedded, linked to its file (click to open it at full size). A wide one — several panels — is
    shown at its own size up to the page's width, where its labels read as in the notebook; a single panel at
    half the width, two side by side."""
    raw = path.read_bytes()
    cls = ' class="wide"' if png_width(raw) >= WIDE_PX else ""
    data = base64.b64encode(raw).decode("ascii")
    return (f'<figure{cls}><a href="{esc(href)}" title="click to open at full size">'
            f'<img alt="{esc(path.stem)}" src="data:image/png;base64,{data}"></a><figcaption>{esc(path.name)} · '
            f'<a href="{esc(href)}">full size</a></figcaption></figure>')


REDRAWN = {"dedup_operators"}  # 07's notebook draws 02's view again, from the same file, for its own reader


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
