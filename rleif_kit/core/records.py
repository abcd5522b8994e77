"""Recorded figures: ``record(name, value)`` → ``reports/<run>/metrics.json``, one object per stage.

Notebooks end with a ``record(...)`` cell; tests, baselines and the report read these numbers, so
their names are documented in docs/results.md ("Recorded metrics"). The file is rewritten atomically
(write to a temporary file, then rename) so a crash never leaves half a JSON document.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from rleif_kit.core.jsonl import kit_file_error

_current: dict[str, Any] = {"path": None, "stage": None}


def set_target(metrics_path: str | Path, stage: str) -> None:
    """Where ``record`` writes from now on (``setup`` calls this for each notebook)."""
    _current["path"] = Path(metrics_path)
    _current["stage"] = stage


def _jsonable(value: Any) -> Any:
    if hasattr(value, "tolist") and getattr(value, "ndim", 0) > 0:  # numpy arrays / torch tensors
        value = value.tolist()  # (.item() only works for a single element)
    elif hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def write_json_atomic(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise kit_file_error(path) from None
    if path.is_dir():  # os.replace onto a directory would end in a traceback
        raise kit_file_error(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)  # e.g. a value json cannot write: the old file stays, no stray *.tmp
        raise


def read_records(path: str | Path) -> dict[str, dict[str, Any]]:
    """All recorded figures of a run, keyed by stage; ``{}`` when nothing was recorded yet."""
    p = Path(path)
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def record(name: str, value: Any, stage: str | None = None) -> Any:
    """Record one figure of the current stage (and return it, so a notebook cell shows it). ``verdicts`` may be a
    list of ``Verdict``: stored as ``{check: status}`` plus ``verdict_details``."""
    path, stage = _current["path"], stage or _current["stage"]
    if path is None or stage is None:
        raise RuntimeError("record() needs setup(...) to have run first in this notebook")
    data = read_records(path)
    if name == "verdicts" and isinstance(value, (list, tuple)) and all(hasattr(v, "to_dict") for v in value):
        # Verdicts: {check: status} as the tests and baselines read it, and each one whole (numbers, thresholds,
        # advice) under verdict_details for the report
        data.setdefault(stage, {})["verdict_details"] = _jsonable([v.to_dict() for v in value])
        value = {v.check: v.status for v in value}
    elif name == "verdicts":
        data.setdefault(stage, {}).pop("verdict_details", None)  # details of an earlier recording would lie
    data.setdefault(stage, {})[name] = _jsonable(value)
    write_json_atomic(path, data)
    return value
