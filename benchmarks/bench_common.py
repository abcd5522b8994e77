"""What the benchmarks that time the tiny preset share: its kernels and threads in a fresh process, one child run's
JSON, and the result written to reports/bench/<name>.json."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def last_fifth(log: list[dict], key: str) -> float | None:
    """Mean of ``key`` over the last fifth of a PPO log's steps (at least one), the steps without it left out; None
    when none of them has it."""
    values = [r[key] for r in log[-max(1, len(log) // 5):] if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def pin_kernels(threads: int = 2) -> None:
    """The tiny preset's pinned kernels and thread count; call before torch is imported."""
    sys.path.insert(0, str(ROOT))
    from rleif_kit.core.numerics import kernel_environment

    os.environ.update(kernel_environment("pinned"))
    import torch

    torch.set_num_threads(threads)


def child_json(script: str, args: list[str], quiet: bool = False) -> Any:
    """Run ``script`` with ``args`` and ``--out FILE`` in a fresh process; what it wrote to FILE, parsed."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = Path(f.name)
    try:
        subprocess.run([sys.executable, script, *args, "--out", str(out)], check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if quiet else None)
        return json.loads(out.read_text())
    finally:
        out.unlink(missing_ok=True)


def write_result(name: str, result: dict) -> Path:
    """``result`` to reports/bench/<name>.json (committed) and to stdout."""
    path = ROOT / "reports" / "bench" / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return path
