"""The RLEIF loop: ``[loop] iterations = N`` repeats 01-06, each iteration seeded from the previous one.
On disk under tmp_path; the slow test runs 00_setup once and 01_evolve to 06_eval twice, with papermill and no
network, on a micro version of the tiny preset (about 3 minutes)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import load_config
from rleif_kit.worlds.data import load_seeds
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.pipeline.loop import iteration_dir, iteration_overrides, plan_steps, summarize_loop
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.records import write_json_atomic
from rleif_kit.pipeline.runner import run_pipeline


def test_loop_defaults_to_one_iteration_and_rejects_zero(tmp_path):
    from rleif_kit.core.config import ConfigError

    assert load_config(TINY_PARAMS, tiny_overrides(tmp_path)).loop.iterations == 1
    with pytest.raises(ConfigError, match=r"\[loop\] iterations = 0: expected a value > 0"):
        load_config(TINY_PARAMS, tiny_overrides(tmp_path, "loop.iterations=0"))


def test_plan_repeats_01_to_06_and_runs_the_rest_once():
    stages = ["00_setup", "01_evolve", "02_dedup", "05_ppo", "07_reward_diagnostics"]
    assert plan_steps(stages, 1) == [(1, s) for s in stages]
    assert plan_steps(stages, 2) == [(1, "00_setup"), (1, "01_evolve"), (1, "02_dedup"), (1, "05_ppo"),
                                     (2, "01_evolve"), (2, "02_dedup"), (2, "05_ppo"),
                                     (2, "07_reward_diagnostics")]  # diagnostics read the last iteration
    assert iteration_dir(ROOT, 1) == ROOT and iteration_dir(ROOT, 3) == ROOT / "iter-3"


def _write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_iteration_k_evolves_what_k_minus_1_kept_from_its_ppo_policy(tmp_path):
    out = tmp_path / "run"
    problem = {"topic": "garden", "name": "Maya", "item": "plants", "start": 4,
               "ops": [{"kind": "div", "value": 2, "template": 3}], "intro": 1, "question_form": 0}
    _write_jsonl(out / "02_dedup" / "instructions.jsonl", [
        {"id": "seed-000001", "round": 0, "operator": "seed", "text": "a seed", "answer": "Step 1: ..."},
        {"id": "seed-000001-r1-deepen", "round": 1, "operator": "deepen", "text": "an evolved one",
         "answer": "Step 1: 4 / 2 = 2. The answer is: 2", "problem": problem}])
    assert iteration_overrides(out, 1) == ([], [])

    overrides, notes = iteration_overrides(out, 2)
    seeds = out / "iter-2" / "seeds.jsonl"
    assert overrides == [f'base.output_dir="{out / "iter-2"}"', f'evol_instruct.seeds="{seeds}"']
    assert [r["id"] for r in read_jsonl(seeds)] == ["seed-000001-r1-deepen"]  # k-1's own seeds left out
    assert "1 seed instructions kept by iteration 1" in notes[0] and "05_ppo not run" in notes[1]

    (out / "05_ppo" / "model").mkdir(parents=True)
    overrides, notes = iteration_overrides(out, 2)
    assert overrides[-1] == f'base.model_name="{out / "05_ppo" / "model"}"'

    # the seeds file loads as seeds: 'text' is the instruction, the arithmetic 'problem' rides along
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path / "x", *overrides), workdir=ROOT)
    assert cfg.output_dir == out / "iter-2"
    loaded = list(load_seeds(cfg, RunPaths(cfg.output_dir, tmp_path / "reports")))
    assert loaded == [{"id": "seed-000001-r1-deepen", "root_id": "seed-000001-r1-deepen", "round": 0,
                       "text": "an evolved one", "answer": "Step 1: 4 / 2 = 2. The answer is: 2",
                       "problem": problem}]


def test_loop_summary_reads_each_iterations_metrics(tmp_path):
    reports = tmp_path / "reports"
    write_json_atomic(reports / "metrics.json", {"02_dedup": {"kept": 40}, "05_ppo": {"reward_last_fifth": 0.5}})
    write_json_atomic(reports / "iter-2" / "metrics.json",
                      {"02_dedup": {"kept": 55}, "03_sft": {"accuracy_after": 0.7}})
    rows = json.loads(summarize_loop(reports, tmp_path / "run", 2).read_text())["iterations"]
    assert [(r["iteration"], r["kept_instructions"], r["reward_last"], r["sft_accuracy"]) for r in rows] == [
        (1, 40, 0.5, None), (2, 55, None, 0.7)]
    assert rows[1]["output_dir"] == str(tmp_path / "run" / "iter-2")


LOOP_MICRO = ('evol_instruct.seeds="arith:24"', "evol_instruct.rounds=1", "tiny.corpus_problems=300",
              'sft.dataset="arith:1500"', "sft.max_steps=25", "sft.eval_samples=40", "sft.save_steps=1000",
              "reward_model.irm_groups=24", "reward_model.prm_samples=96", "reward_model.rm_epochs=1",
              "reward_model.prm_hard_negatives=48",  # right answers for the generative PRM of a 25-step SFT model
              "ppo.total_steps=2", "ppo.rollout_batch=8", "ppo.mini_batch=8", "ppo.gen_batch=8",
              "ppo.gate_samples=8", "ppo.eval_samples=40", "ppo.save_every=1", "ppo.force=true", "eval.limit=40",
              "loop.iterations=2")


@pytest.mark.slow
def test_two_iterations_of_the_whole_loop(tmp_path, monkeypatch, capsys):
    """01-06 twice on a micro version of the tiny preset: iteration 2 evolves what iteration 1 kept, and its
    SFT, reward models and PPO all start from iteration 1's PPO policy; the summary spans both."""
    monkeypatch.chdir(ROOT)
    reports, run = tmp_path / "reports", tmp_path / "run"
    stages = "00_setup,01_evolve,02_dedup,03_sft,04_reward_models,05_ppo,06_eval"
    runs = run_pipeline(str(TINY_PARAMS), stages, tiny_overrides(run, *LOOP_MICRO), report_dir=str(reports))
    looped = stages.split(",")[1:]
    assert [r.stage for r in runs] == ["00_setup", *looped, *looped]
    out = capsys.readouterr().out
    assert "iteration 2/2" in out
    assert f"base model = iteration 1's PPO policy ({run / '05_ppo' / 'model'})" in out

    # iteration 2 trained on from iteration 1's policy, in its own folders
    import torch
    from safetensors.torch import load_file

    ppo_1 = load_file(run / "05_ppo" / "model" / "model.safetensors")
    base_1 = load_file(run / "tiny-llama" / "model.safetensors")
    sft_2 = load_file(run / "iter-2" / "03_sft" / "model" / "model.safetensors")
    name = next(n for n in ppo_1 if n.endswith("mlp.up_proj.weight"))
    assert not torch.equal(ppo_1[name], base_1[name])  # SFT + PPO moved iteration 1's weights
    sft_info = json.loads((run / "iter-2" / "03_sft" / "model" / "sft_info.json").read_text())
    # named relative to the info file's folder, iter-2/03_sft/model -> ../../../05_ppo/model: a moved loop run loads
    assert sft_info["base_model"] == "../../../05_ppo/model", sft_info
    assert not torch.equal(sft_2[name], ppo_1[name])  # and iteration 2's SFT trained on from there
    for part in ("01_evolve/evolved.jsonl", "04_reward_models/irm/rm_info.json", "05_ppo/log.jsonl",
                 "05_ppo/model/model.safetensors", "06_eval/summary.json"):
        assert (run / "iter-2" / part).exists(), part
    assert (reports / "iter-2" / "06_eval.ipynb").exists()

    # iteration 2 evolved what iteration 1 kept (less its own seeds)
    kept_1 = {r["id"] for r in read_jsonl(run / "02_dedup" / "instructions.jsonl") if r["round"] > 0}
    seeds_2 = [r["id"] for r in read_jsonl(run / "iter-2" / "seeds.jsonl")]
    assert seeds_2 and set(seeds_2) == kept_1
    evolved_2 = list(read_jsonl(run / "iter-2" / "01_evolve" / "evolved.jsonl"))
    assert evolved_2 and {r["root_id"] for r in evolved_2} <= kept_1

    rows = json.loads((reports / "loop_summary.json").read_text())["iterations"]
    assert [r["iteration"] for r in rows] == [1, 2] and rows[1]["evolved_kept"] == len(evolved_2)
    for r in rows:
        assert r["kept_instructions"] > 0 and 0.0 <= r["sft_accuracy"] <= 1.0, r
        assert r["reward_last"] is not None and r["ppo_accuracy"] is not None and r["eval_accuracy"], r
    page = (reports / "index.html").read_text()
    assert 'id="loop"' in page and 'id="iter-2/05_ppo"' in page and 'href="iter-2/05_ppo.ipynb"' in page

    # rerun: every step of both iterations is complete and unchanged
    assert run_pipeline(str(TINY_PARAMS), stages, tiny_overrides(run, *LOOP_MICRO), report_dir=str(reports)) == []
