"""What libraries print while a stage runs, as plain lines on stdout: a warning is not an error.

Python's warnings and transformers' log go to stderr, which a notebook shows as an error (red, pink in the
executed copy) although the stage is fine: a FutureWarning about a renamed argument, or transformers' "LOAD
REPORT" table when a reward model gets its new score head (MISSING: newly initialised — what 04 means to do).
Here each becomes one plain line on stdout that keeps what a user needs: the library, the category and the
message; a load report becomes the keys it names by status. ``core/run_setup.setup`` installs both in every
notebook's kernel; an exception is still an error.
"""

from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;]*m")
REPORT_ROW = re.compile(r"^\s*(\S+)\s*\|\s*([A-Z_]+)\s*\|", re.M)
STATUS_WORDS = {"MISSING": "newly initialised (MISSING)", "UNEXPECTED": "not used (UNEXPECTED)"}


def load_report_line(message: str) -> str:
    """transformers' LOAD REPORT table as one line: the model class, where from, and the keys per status
    (``LlamaForTokenClassification from m: newly initialised (MISSING): score.bias, score.weight; ...``)."""
    text = ANSI.sub("", message)
    head = text.splitlines()[0].replace(" LOAD REPORT", "").strip()
    keys: dict[str, list[str]] = {}
    for key, status in REPORT_ROW.findall(text):
        if key != "Key":
            keys.setdefault(status, []).append(key)
    parts = [f"{STATUS_WORDS.get(s, s)}: {', '.join(k)}" for s, k in keys.items()]
    return f"{head}: {'; '.join(parts)}" if parts else head


def plain_line(library: str, message: str) -> str:
    """One log record of ``library`` as a plain line (a load report condensed, colours dropped)."""
    text = load_report_line(message) if "LOAD REPORT" in message else ANSI.sub("", message).strip()
    return f"[{library}] {text}"


def _library(filename: str) -> str:
    """The package a warning comes from: the folder under site-packages, else the file's name."""
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts and parts.index(marker) + 1 < len(parts):
            return parts[parts.index(marker) + 1].removesuffix(".py")
    return Path(filename).stem


def show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ARG001
    """``warnings.showwarning`` as one plain stdout line: ``[transformers] FutureWarning: ...`` (no source line)."""
    print(f"[{_library(filename)}] {category.__name__}: {message}", file=sys.stdout)


class PlainLines(logging.Handler):
    """A log handler writing each record as :func:`plain_line` to the stdout of the moment (a kernel's)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(plain_line(record.name.split(".")[0], record.getMessage()), file=sys.stdout)
        except Exception:  # noqa: BLE001 - logging's own contract: a handler never raises
            self.handleError(record)


def plain_library_output() -> None:
    """Warnings and transformers' log as plain stdout lines from now on (idempotent)."""
    warnings.showwarning = show_warning
    try:
        from transformers.utils import logging as hf_logging  # heavy: loaded on first use (torch is already)
    except ImportError:  # pragma: no cover - the kit always installs transformers; a trimmed env has no log
        return
    root = logging.getLogger("transformers")
    if not any(isinstance(h, PlainLines) for h in root.handlers):
        hf_logging.disable_default_handler()
        root.addHandler(PlainLines())
