"""``make demo-math``: the tiny-math preset through the loopback teacher — the real path, offline.

Writes the teacher's GSM8k / MATH-format files where the preset reads them (``[sft] gsm8k_train``'s
folder), starts the teacher on loopback, writes a settings.json for it next to the run's artifacts (the
API key travels in an environment variable only, as with a real endpoint), runs the pipeline, and keeps
what the teacher was asked (``teacher_requests.json``: requests by kind) beside the run.

    python -m rleif_kit.testing.demo_math [--set section.key=value ...] [--report-dir DIR] [--stages ...]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from rleif_kit.core.config import load_config
from rleif_kit.pipeline.runner import run_pipeline
from rleif_kit.testing.teacher import serve, settings_for

PRESET = "params/tiny-math.toml"
KEY_ENV = "RLEIF_TEACHER_KEY"
TRAIN_PROBLEMS = 8000  # GSM8k- and MATH-format training problems the teacher writes (three quarters GSM8k)


def teacher_world(cfg: Any) -> dict:
    """The teacher's world of a run: the preset's [arith] ranges (steps, operand size) and the held-out size as the
    test set; the training file holds the SFT examples' count."""
    a = cfg.arith
    return {"n_train": TRAIN_PROBLEMS, "n_test": a.heldout_size, "max_steps": a.max_steps, "max_operand": a.max_operand}


def run_demo(params: str = PRESET, overrides: list[str] | None = None, report_dir: str | None = None,
             stages: str | None = None, noise: float = 1.0) -> tuple[list[Any], dict[str, int]]:
    """(the stage runs, the teacher's requests by kind)."""
    overrides = list(overrides or [])
    cfg = load_config(params, overrides)
    raw = cfg.resolve(cfg.sft.gsm8k_train).parent
    server, teacher = serve(raw, seed=cfg.base.seed, noise=noise, world=teacher_world(cfg))
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    settings = cfg.output_dir / "teacher-settings.json"
    settings.write_text(json.dumps(settings_for(server.base_url, KEY_ENV, raw), indent=1) + "\n")
    os.environ.setdefault(KEY_ENV, "sk-lb-Q3v8Xk2Rw7Jm")  # random-looking: 6 characters of a key are redacted
    try:
        runs = run_pipeline(params, stages, overrides, settings_path=str(settings), report_dir=report_dir)
    finally:
        server.stop()
        kinds = dict(sorted(teacher.kinds.items()))
        (cfg.output_dir / "teacher_requests.json").write_text(json.dumps(kinds, indent=1) + "\n")
    return runs, kinds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the tiny-math preset through the loopback teacher")
    p.add_argument("--params", default=PRESET)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--report-dir")
    p.add_argument("--stages")
    args = p.parse_args(argv)
    try:
        runs, kinds = run_demo(args.params, args.overrides, args.report_dir, args.stages)
    except FileExistsError as e:
        print(f"demo-math: error: {e}")
        return 2
    for run in runs:
        print(f"{run.stage}: {run.seconds:.0f} s")
    print("teacher requests by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
