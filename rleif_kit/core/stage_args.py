"""The one argument parser of the stage entry points: ``python -m rleif_kit.<stage> --params FILE [--set ...]``.

Every stage adds its own few flags to this parser, so ``--params``, ``--set`` and ``--settings`` read the
same everywhere (and as in ``rleif run``).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from typing import Callable

from rleif_kit.core import disk, run_lock
from rleif_kit.core.config import ConfigError
from rleif_kit.core.exits import EXIT_REJECTED, DiskFull, EndpointRejected, StageIncomplete
from rleif_kit.core.settings import SettingsError

READ_ONLY = ("diagnostics",)  # stages that only read the run: no lock


def stage_parser(stage: str, description: str, settings: bool = False) -> argparse.ArgumentParser:
    """``--params FILE`` (required), ``--set SECTION.KEY=VALUE`` (repeatable) and, with ``settings``,
    ``--settings FILE`` (the endpoint settings; optional)."""
    p = argparse.ArgumentParser(prog=f"python -m rleif_kit.{stage}", description=description)
    p.add_argument("--params", required=True, help="run config, e.g. params/tiny-cpu.toml")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config value (repeatable)")
    if settings:
        p.add_argument("--settings", help="endpoint settings (settings.json)")
    return p


def run_entry_point(stage: str, main: Callable[[], int | None]) -> int:
    """Run a stage's ``main``: a user error (a bad config or settings file, a missing input, a bad value, an output
    directory another run holds) is one line and exit status 2, as from ``rleif``; a full disk one line and exit 5
    (``core/disk.py``); anything else keeps its traceback."""
    try:
        try:
            with run_lock.locking(stage not in READ_ONLY):  # one run per output directory (core/run_lock.py)
                return main() or 0
        except (OSError, sqlite3.DatabaseError) as e:  # out of space in a write no writer named: still one line
            if isinstance(e, FileNotFoundError) or (full := disk.unnamed(e)) is None:
                raise
            raise full from e
    except (ConfigError, SettingsError, FileNotFoundError, ValueError, run_lock.RunLocked, EndpointRejected,
            StageIncomplete, DiskFull) as e:
        text = str(e)
        print(f"python -m rleif_kit.{stage}: error:" + ("\n" if "\n" in text else " ") + text, file=sys.stderr)
        return EXIT_REJECTED if isinstance(e, EndpointRejected) else getattr(e, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
