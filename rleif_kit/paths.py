"""The one place that knows where each artifact lives under ``[base].output_dir``.

Stages read what earlier stages wrote only through these names, so moving a file is a one-line
change here. The layout is the run directory of DESIGN.md §3.
"""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

STAGES = ("00_setup", "01_evolve", "02_dedup", "03_sft", "04_reward_models", "05_ppo", "06_eval",
          "07_reward_diagnostics")


@contextmanager
def staged_dir(target: Path, replace: bool = True) -> Iterator[Path]:
    """A fresh sibling folder (``<target>.tmp``) to write a directory artifact into; it takes the place of
    ``target`` only when the block ends without an error, so a crash never leaves half of it at ``target``.
    With ``replace=False`` an existing ``target`` must be empty (else OSError, nothing replaced)."""
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    if target.exists():
        if replace:
            shutil.rmtree(target)
        else:
            target.rmdir()  # refuses a directory that is not empty
    tmp.rename(target)


@dataclass(frozen=True)
class RunPaths:
    """Artifact paths of one run: ``output_dir`` holds the artifacts, ``report_dir`` the notebooks."""

    output_dir: Path
    report_dir: Path

    def stage(self, name: str) -> Path:
        """``<output_dir>/<stage>/``, created on first use."""
        if name not in STAGES:
            raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGES)}")
        d = self.output_dir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    # run level
    @property
    def resolved_config(self) -> Path:
        return self.output_dir / "config.resolved.toml"

    @property
    def manifest(self) -> Path:
        return self.output_dir / "manifest.json"

    @property
    def metrics(self) -> Path:
        return self.report_dir / "metrics.json"

    @property
    def figures(self) -> Path:
        d = self.report_dir / "figures"
        d.mkdir(parents=True, exist_ok=True)
        return d

    # 03_sft
    @property
    def sft_data(self) -> Path:
        """The SFT examples actually trained on (prompt/completion), as built by the SFT stage."""
        return self.stage("03_sft") / "train.jsonl"

    @property
    def sft_model(self) -> Path:
        return self.stage("03_sft") / "model"

    @property
    def sft_checkpoints(self) -> Path:
        return self.stage("03_sft") / "checkpoints"

    @property
    def sft_log(self) -> Path:
        return self.stage("03_sft") / "log.jsonl"

    # the arithmetic world's fixed splits
    @property
    def arith_heldout(self) -> Path:
        return self.output_dir / "arith" / "heldout.jsonl"
