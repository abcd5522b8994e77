"""The test world (``tests/toy_world.py``) through the whole pipeline, 00 -> 07, on the tiny model: a world the
kit has never heard of, loaded by module path, runs every stage through the ``World`` interface (slow: ~3 min)."""

from __future__ import annotations

import json
import os

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.records import read_records

pytestmark = pytest.mark.slow

SMALL = [  # the tiny preset cut to a couple of minutes: what matters is that every stage runs on the world
    'base.world="toy_world"', 'sft.dataset="toy:3000"', 'evol_instruct.seeds="toy:60"', "evol_instruct.rounds=2",
    "sft.max_steps=250", "sft.eval_samples=100", "dedup.min_kept=10", "reward_model.irm_groups=40",
    "reward_model.prm_samples=200", "reward_model.irm_samples_per_instruction=2", "reward_model.rm_epochs=1",
    "reward_model.prm_hard_negatives=100",  # the world's step verifier labels its edits too
    "ppo.total_steps=4", "ppo.rollout_batch=16",
    "ppo.mini_batch=8", "ppo.gen_batch=16", "ppo.gate_samples=16", "ppo.eval_samples=100", "ppo.save_every=2",
    'eval.benchmarks=["toy_sums"]', "eval.limit=100",
    # the gate's 16 samples of a 250-step SFT model hold few right answers and, on a fresh install of 2026-12-02,
    # none with every step right, so reward_truth read 0.5 and stopped PPO at the base commit as after it (measured);
    # this test is about the world interface: its probes still run and are asserted below
    "ppo.force=true",
]


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory, monkeypatch_module):
    from rleif_kit.pipeline.runner import run_pipeline

    root = tmp_path_factory.mktemp("toy")
    tests = str(ROOT / "tests")
    monkeypatch_module.setenv("PYTHONPATH", os.pathsep.join(p for p in (tests, os.environ.get("PYTHONPATH")) if p))
    monkeypatch_module.syspath_prepend(tests)
    monkeypatch_module.chdir(ROOT)
    runs = run_pipeline(str(TINY_PARAMS), overrides=tiny_overrides(root / "run", *SMALL),
                        report_dir=str(root / "reports"))
    return root, runs


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_every_stage_runs_on_a_world_the_kit_does_not_know(toy_run):
    root, runs = toy_run
    assert [r.stage for r in runs] == ["00_setup", "01_evolve", "02_dedup", "03_sft", "04_reward_models", "05_ppo",
                                       "06_eval", "07_reward_diagnostics"]
    metrics = read_records(root / "reports" / "metrics.json")
    run = root / "run"
    assert (run / "toy_world" / "heldout.jsonl").exists()  # the world's own split, in its own folder
    evolved = [json.loads(line) for line in (run / "01_evolve" / "evolved.jsonl").read_text().splitlines()]
    assert evolved and all(r["model"] == "toy_world-evolver" and "numbers" in r["problem"] for r in evolved)
    assert metrics["03_sft"]["accuracy_after"] > metrics["03_sft"]["accuracy_before"]  # its benchmark, its checker
    prm = [json.loads(line) for line in (run / "04_reward_models" / "prm_steps.jsonl").read_text().splitlines()]
    sources = {r["source"].split(":")[0] for r in prm}  # labelled by the world's own step verifier: its samples and
    assert prm and sources == {"verifier", "hard_negative"}, sources  # the edits of its right answers
    assert metrics["05_ppo"]["steps"] == 4
    summary = json.loads((run / "06_eval" / "summary.json").read_text())
    assert set(summary["summary"]["sft"]) == {"toy_sums"} and summary["summary"]["sft"]["toy_sums"]["n"] == 100
    verdicts = json.loads((run / "07_reward_diagnostics" / "verdicts.json").read_text())["verdicts"]
    probes = [v for v in verdicts if v["check"].startswith("prm_probe_")]  # PPO's rA, the learned PRM, is probed
    assert probes and all("toy_world/heldout" in v["source"] for v in probes), probes  # by edits of its held-out split


def test_the_report_and_notebooks_speak_the_toy_world_never_the_arithmetic_one(toy_run, tmp_path):
    """A world the kit does not know: its page names toy_world and the run's reward, and neither the page nor an
    executed notebook says "arithmetic" (the preset's [reasons] speak of it: noted, not shown)."""
    from browser import assert_page_speaks_its_world, mentions, notebooks_text

    root, _ = toy_run
    assert_page_speaks_its_world(tmp_path, root / "reports", "toy_world", "r = rI · rA",
                                 never=("arithmetic", "tiny_code"))
    said = mentions(notebooks_text(root / "reports"), "arithmetic")
    assert said == [], "\n".join(said)
