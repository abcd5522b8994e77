"""What ``rleif run`` tells the terminal and leaves for the report: each stage's status, its log, its progress lines.

- ``StageStream``: papermill's stdout/stderr target for one stage. Every byte the notebook prints goes to
  ``reports/<run>/logs/NN_stage.log``; the terminal gets only the progress lines (``core.progress.LINE``) and the
  kit's warnings and notes, indented under the stage's own line.
- ``RunStatus``: ``reports/<run>/run.json``, rewritten at every transition (so a crash leaves the truth): per
  stage its status — ``ok``, ``skipped`` (complete, config unchanged), ``failed``, ``stopped`` (finished but
  incomplete), ``stale`` (an earlier stage reran after its figures were recorded) or ``not run`` — with the reason,
  the wall time and the log, plus the params file, the overrides and the config keys that differ from the kit's
  defaults. Paths in it are relative to the report folder, so a moved report folder still reads.
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

from rleif_kit.core.progress import LINE
from rleif_kit.core.records import read_records, write_json_atomic
from rleif_kit.core.run_setup import RUN_FILE

TO_TERMINAL = ("warning:", "note:", "KL guard", "resuming from")  # the kit's own, besides progress lines


class StageStream:
    """A file-like sink for papermill's ``stdout_file`` / ``stderr_file``: the log gets everything, the terminal
    the lines a person watching wants."""

    def __init__(self, log: Path, terminal: TextIO | None = None, indent: str = "    "):
        log.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(log, "a", encoding="utf-8")  # noqa: SIM115 - closed by close(), after the stage
        self.terminal, self.indent, self.pending, self.shown = terminal or sys.stdout, indent, "", 0

    def write(self, text: str) -> int:
        self.file.write(text)
        self.file.flush()
        self.pending += text.replace("\r", "\n")  # a tqdm redraw is a line too
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            found = LINE.search(line)
            if found or line.lstrip().startswith(TO_TERMINAL):
                print(self.indent + line[found.start() if found else 0:].strip(), file=self.terminal, flush=True)
                self.shown += 1
        return len(text)

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        if self.pending:
            self.write("\n")
        self.file.close()


def stage_key(prefix: str, stage: str) -> str:
    """``03_sft``, or ``iter-2/03_sft`` for a later loop iteration (``prefix`` "iter-2/")."""
    return prefix + stage


class RunStatus:
    """``run.json`` of one report folder, kept current while ``rleif run`` works."""

    def __init__(self, report_dir: Path, header: dict[str, Any]):
        self.path = Path(report_dir) / RUN_FILE
        old = read_records(self.path)
        self.data = {**header, "started": _now(), "finished": None,
                     "stages": {k: v for k, v in old.get("stages", {}).items()}}
        self.save()

    def set(self, key: str, status: str, reason: str = "", seconds: float | None = None,
            log: Path | None = None, **extra: Any) -> None:
        entry = {"status": status, "reason": reason, "updated": _now(), **extra}
        if seconds is not None:
            entry["seconds"] = round(seconds, 1)
        elif status in ("ok", "skipped", "stale") and "seconds" in self.data["stages"].get(key, {}):
            entry["seconds"] = self.data["stages"][key]["seconds"]  # the wall time of the run that made it
        if log is not None:
            entry["log"] = os.path.relpath(log, self.path.parent)
        elif self.data["stages"].get(key, {}).get("log"):
            entry["log"] = self.data["stages"][key]["log"]
        self.data["stages"][key] = entry
        self.save()

    def get(self, key: str) -> dict[str, Any]:
        return self.data["stages"].get(key, {})

    def finish(self) -> None:
        self.data["finished"] = _now()
        self.save()

    def save(self) -> None:
        write_json_atomic(self.path, self.data)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
