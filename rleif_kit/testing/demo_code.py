"""The tiny-code preset through the code loopback teacher: the WizardCoder arm's endpoint path, offline.

``params/tiny-code.toml`` evolves and judges with the tiny code world's own programmatic evolver (no endpoint).
This runs the same preset with every request a real run sends to a chat model going through an OpenAI-compatible
server instead (:mod:`rleif_kit.testing.code_teacher`): Code Evol-Instruct's operator templates, the equality
judge, an answer and four tests for each kept evolution (run against each other in the sandbox), the IRM's sibling
rankings (``models.irm_judge``) and the PRM's step labels (``models.prm_judge``). The API key travels in an
environment variable only, and what the teacher was asked is kept beside the run (``teacher_requests.json``).

    python -m rleif_kit.testing.demo_code [--set section.key=value ...] [--report-dir DIR] [--stages ...]
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.pipeline.runner import run_pipeline
from rleif_kit.testing.code_teacher import serve_code
from rleif_kit.worlds.data import load_seeds

PRESET = "params/tiny-code.toml"
KEY_ENV = "RLEIF_CODE_TEACHER_KEY"
ENDPOINT = ['evol_instruct.backend="openai"', "evol_instruct.equality_judge=true", "evol_instruct.concurrency=8",
            'reward_model.prm_step_label="chatgpt_judged"']


def settings_for(base_url: str) -> dict:
    """Every role the run asks a chat model in, played by the teacher."""
    roles = {r: "teacher" for r in ("evolve", "irm_judge", "prm_judge", "code_eval")}
    return {"api": {"base_url": base_url, "api_key_env": KEY_ENV, "timeout": 30, "max_retries": 2}, "models": roles,
            "prices": {"teacher": {"input_per_million": 0.5, "output_per_million": 1.5}}}


def run_demo(params: str = PRESET, overrides: list[str] | None = None, report_dir: str | None = None,
             stages: str | None = None) -> tuple[list[Any], dict[str, int]]:
    """(the stage runs, the teacher's requests by kind)."""
    overrides = ENDPOINT + list(overrides or [])
    cfg = load_config(params, overrides)
    server, teacher = serve_code(seed=cfg.base.seed, fault=cfg.tiny_code.teacher_fault)
    teacher.learn(load_seeds(cfg, RunPaths(cfg.output_dir)))  # the seed tasks it is asked to rewrite
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    settings = cfg.output_dir / "teacher-settings.json"
    settings.write_text(json.dumps(settings_for(server.base_url), indent=1) + "\n")
    os.environ.setdefault(KEY_ENV, "sk-lb-N6t2Hp9Yc4Fs")  # random-looking: 6 characters of a key are redacted
    try:
        runs = run_pipeline(params, stages, overrides, settings_path=str(settings), report_dir=report_dir)
    finally:
        server.stop()
        kinds = dict(sorted(teacher.asked.items()))
        (cfg.output_dir / "teacher_requests.json").write_text(json.dumps(kinds, indent=1) + "\n")
    return runs, kinds


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="the tiny-code preset through the code loopback teacher")
    p.add_argument("--params", default=PRESET)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--report-dir")
    p.add_argument("--stages")
    args = p.parse_args(argv)
    try:
        runs, kinds = run_demo(args.params, args.overrides, args.report_dir, args.stages)
    except FileExistsError as e:
        print(f"demo-code-endpoint: error: {e}")
        return 2
    for run in runs:
        print(f"{run.stage}: {run.seconds:.0f} s")
    print("teacher requests by kind: " + ", ".join(f"{k} {n}" for k, n in kinds.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
