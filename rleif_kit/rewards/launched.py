"""Reward-model training under ``[base] launcher = "accelerate"``: the rows go to disk, the launched ranks
(``python -m rleif_kit.rewards --only irm|prm``) read them back and train."""

from __future__ import annotations

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.core.launch import maybe_launch, should_launch
from rleif_kit.core.paths import RM_ROWS, RunPaths

TRAINED = tuple(RM_ROWS)  # what ``--only`` names


def launch_training(cfg: RunConfig, paths: RunPaths, which: str, rows: list[dict],
                    heldout_share: float | None = None) -> bool:
    """Write the training rows of ``which`` and train it under ``accelerate launch`` (``--only``); False when
    the caller should train in-process."""
    if not should_launch(cfg):
        return False
    write_jsonl(paths.rm_rows(which), rows)
    extra = [] if heldout_share is None else [f"reward_model.rm_heldout_share={heldout_share}"]
    return maybe_launch(cfg, "rleif_kit.rewards", overrides=[*cfg.overrides, *extra], args=["--only", which])
