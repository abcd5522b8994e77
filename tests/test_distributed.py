"""Several processes through ``accelerate launch``: two CPU ranks (gloo) run SFT for a few steps and one PPO
step, started the way a notebook starts them with ``[base] launcher = "accelerate"``; both ranks end with
identical trainable weights, the saved model is what they hold, and only rank 0 wrote artifacts. Also the
launcher's pieces and the vLLM settings, without a subprocess.

Local subprocesses only, no network. Which files each rank wrote is read with an audit hook that a
``sitecustomize.py`` on the children's PYTHONPATH installs (Python's ``sys.addaudithook``), so the kit
itself carries no test code for it; the weights come from ``distributed.debug_dump`` (off unless
``RLEIF_DEBUG_DUMP_DIR`` is set).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides

CPU2 = """compute_environment: LOCAL_MACHINE
distributed_type: MULTI_GPU
num_processes: 2
num_machines: 1
mixed_precision: "no"
use_cpu: true
"""

AUDIT = '''
import atexit, json, os, sys

_rank, _root, _writes = os.environ.get("RANK"), os.environ.get("RLEIF_AUDIT_ROOT", ""), set()


def _note(path):
    if isinstance(path, (str, bytes, os.PathLike)):
        path = os.path.abspath(os.fsdecode(path))
        if path.startswith(_root):
            _writes.add(os.path.relpath(path, _root))


def _hook(event, args):
    if event == "open":
        mode, flags = args[1], args[2] or 0
        if (isinstance(mode, str) and set(mode) & set("wax+")) or (mode is None and flags & (os.O_WRONLY | os.O_RDWR)):
            _note(args[0])
    elif event in ("os.rename", "os.replace"):
        _note(args[1])
    elif event == "os.mkdir" and not os.path.exists(args[0]):
        _note(args[0])


def _dump():
    with open(os.path.join(os.environ["RLEIF_AUDIT_OUT"], f"writes-rank{_rank}-{os.getpid()}.json"), "w") as f:
        json.dump(sorted(_writes), f)


if _rank is not None and _root:
    sys.addaudithook(_hook)
    atexit.register(_dump)
'''

SFT = ('sft.dataset="arith:200"', "sft.open_domain_samples=4", "sft.max_steps=3", "sft.batch_size=4",
       "sft.logging_steps=1", "sft.save_steps=100", "sft.eval_samples=4", "eval.max_new_tokens=24", "eval.batch_size=4")
PPO = ("ppo.total_steps=1", "ppo.rollout_batch=4", "ppo.mini_batch=2", "ppo.gen_batch=2", "ppo.ppo_epochs=1",
       "ppo.max_new_tokens=16", "ppo.lr=1e-2", "ppo.save_every=1", "ppo.gate_samples=4", "ppo.lora_r=4",
       'reward_model.answer_reward="verifier"', "ppo.force=true", "ppo.kl_limit=1e9")


def _sha(t) -> str:
    return hashlib.sha256(t.detach().float().cpu().contiguous().numpy().tobytes()).hexdigest()


def _writes(audit: Path) -> dict[str, set[str]]:
    """Files and folders each rank created or wrote under the run directory (all its processes together)."""
    out: dict[str, set[str]] = {}
    for f in audit.glob("writes-rank*.json"):
        out.setdefault(f.name.split("-")[1].removeprefix("rank"), set()).update(json.loads(f.read_text()))
        f.unlink()
    return out


def _dumps(folder: Path, tag: str) -> tuple[dict, dict]:
    return tuple(json.loads((folder / f"{tag}-rank{r}.json").read_text()) for r in (0, 1))


@pytest.mark.slow
def test_two_cpu_ranks_run_sft_and_a_ppo_step_with_identical_weights(tmp_path, small_model_dir, monkeypatch):
    from safetensors.torch import load_file

    from rleif_kit.core.run_setup import setup

    run, dump, audit, site = tmp_path / "run", tmp_path / "dump", tmp_path / "audit", tmp_path / "site"
    for d in (audit, site):
        d.mkdir()
    (site / "sitecustomize.py").write_text(AUDIT)
    (tmp_path / "cpu2.yaml").write_text(CPU2)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RLEIF_DEBUG_DUMP_DIR", str(dump))
    monkeypatch.setenv("RLEIF_AUDIT_ROOT", str(run))
    monkeypatch.setenv("RLEIF_AUDIT_OUT", str(audit))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # two ranks on two cores
    overrides = tiny_overrides(run, 'base.launcher="accelerate"', f'base.accelerate_config="{tmp_path / "cpu2.yaml"}"',
                               *SFT, *PPO)
    shutil.copytree(small_model_dir, run / "tiny-llama")  # the base model, so the ranks need not build one

    # SFT: the notebook's call, run by two ranks; the result comes back from disk
    from rleif_kit.sft.stage import run_sft

    cfg, paths = setup(str(TINY_PARAMS), overrides, stage="03_sft", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    result = run_sft(cfg, paths)
    assert result.steps == 3 and result.accuracy_before is not None and result.accuracy_after is not None
    assert [r["step"] for r in result.log if "loss" in r] == [1, 2, 3]  # logged once, not once per rank
    rank0, rank1 = _dumps(dump, "sft")
    assert rank0 == rank1 and len(rank0) > 5  # every weight of the full fine-tuning, bit for bit
    saved = load_file(next(paths.sft_model.glob("*.safetensors")))
    assert {n: _sha(t) for n, t in saved.items()} == {n: rank0[n] for n in saved}  # the saved model is theirs
    writes = _writes(audit)
    assert any(w.startswith("03_sft/model/") for w in writes["0"]) and "03_sft/eval_after.jsonl" in writes["0"]
    assert {w for w in writes["1"] if not w.startswith("03_sft/checkpoints")} == set(), writes["1"]  # Trainer's
    # own per-rank RNG state in its checkpoints is all rank 1 writes

    # PPO: the notebook's cells (policy, scorer, gate in-process), then train() under two ranks
    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.rewards.reward import RewardScorer
    from rleif_kit.ppo.stage import reward_gate, train
    from rleif_kit.rewards.rm_training import save_rm
    from rleif_kit.rewards.rm_training import load_rm_for_training
    from rleif_kit.worlds.data import instruction_pool

    cfg, paths = setup(str(TINY_PARAMS), overrides, stage="05_ppo", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    irm, tok = load_rm_for_training(str(small_model_dir), "sequence", cfg, False)
    save_rm(irm, tok, paths.stage("04_reward_models") / "irm",
            {"head": "sequence", "finetune": "full", "base_model": str(small_model_dir)}, "# test IRM\n")
    policy, scorer, pool = load_policy(cfg, paths), RewardScorer(cfg, paths), instruction_pool(cfg, paths)
    gate = reward_gate(cfg, paths, policy, scorer, pool)
    policy, result = train(cfg, paths, pool, scorer, policy, gate)
    assert result.steps == 1 and not result.stopped
    assert len((paths.stage("05_ppo") / "log.jsonl").read_text().splitlines()) == 1
    rank0, rank1 = _dumps(dump, "ppo")
    assert rank0 == rank1 and any("lora_B" in n for n in rank0) and any("value_head" in n for n in rank0)
    import torch

    checkpoint = torch.load(paths.stage("05_ppo") / "checkpoints" / "step-000001" / "trainable.pt")
    assert {n: _sha(t) for n, t in checkpoint.items()} == rank0
    assert {n: _sha(p) for n, p in policy.named_trainable().items()} == rank0  # the notebook continues with it
    writes = _writes(audit)
    assert "05_ppo/checkpoints/step-000001" in writes["0"] and "05_ppo/log.jsonl" in writes["0"]
    assert writes["1"] == set(), writes["1"]


# ------------------------------------------------------------------ the pieces, without a subprocess

def test_shard_takes_a_contiguous_slice_and_refuses_a_batch_that_does_not_divide(monkeypatch):
    from rleif_kit.core import distributed as dist

    assert dist.shard(list(range(6))) == list(range(6))  # one process: everything
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    assert dist.shard(list(range(6))) == [3, 4, 5]  # rank 0 takes 0, 1, 2: in rank order, the whole batch
    assert not dist.is_main()
    with pytest.raises(ValueError, match=r"\[ppo\] rollout_batch = 5 must divide by the number of processes \(2\)"):
        dist.shard(list(range(5)))


def test_launcher_default_runs_in_process_and_accelerate_builds_the_command(tiny_cfg, monkeypatch):
    from rleif_kit.core.launch import launch_command, maybe_launch, should_launch

    cfg, _ = tiny_cfg()
    assert cfg.base.launcher == "in_process" and maybe_launch(cfg, "rleif_kit.sft") is False
    cfg, _ = tiny_cfg('base.launcher="accelerate"', 'base.accelerate_config="params/accelerate/ddp.yaml"')
    cmd = launch_command(cfg, "rleif_kit.sft")
    assert cmd[1:3] == ["-m", "accelerate.commands.launch"]
    assert cmd[cmd.index("--config_file") + 1] == str(ROOT / "params" / "accelerate" / "ddp.yaml")
    assert "--num_processes" in cmd  # the shipped file leaves it out: one process per GPU (1 without any)
    assert cmd[cmd.index("-m", 3) + 1:cmd.index("-m", 3) + 4] == ["rleif_kit.sft", "--params", cfg.source]
    assert cmd.count("--set") == len(cfg.overrides)
    assert should_launch(cfg)
    monkeypatch.setenv("RLEIF_LAUNCHED", "1")  # inside the launched ranks the same call runs in-process
    assert not should_launch(cfg)


def test_a_missing_accelerate_config_is_named(tiny_cfg):
    from rleif_kit.core.launch import maybe_launch

    cfg, _ = tiny_cfg('base.launcher="accelerate"', 'base.accelerate_config="params/accelerate/nope.yaml"')
    with pytest.raises(FileNotFoundError, match="accelerate_config = 'params/accelerate/nope.yaml': no such file"):
        maybe_launch(cfg, "rleif_kit.sft")


def test_results_cross_the_process_boundary(tmp_path):
    from rleif_kit.core.verdict import Verdict
    from rleif_kit.core.launch import load_result, save_result
    from rleif_kit.ppo.trainer import PPOResult
    from rleif_kit.sft.stage import SFTResult

    sft = SFTResult(tmp_path / "model", "full", 10, 3, 1.5, [{"step": 1, "loss": 2.0}], 0.1, 0.4,
                    [Verdict("sft_learning", "ok", {"gain": 0.3})])
    save_result(sft, tmp_path / "sft.json")
    assert load_result(SFTResult, tmp_path / "sft.json") == sft
    ppo = PPOResult(2, [{"step": 0}, {"step": 1}], [Verdict("low_ra_share", "warn")], "", None, 0, 3.0)
    save_result(ppo, tmp_path / "ppo.json")
    assert load_result(PPOResult, tmp_path / "ppo.json") == ppo


def test_shipped_accelerate_configs_are_valid():
    from accelerate.commands.config.config_args import load_config_from_file

    configs = {p.stem: load_config_from_file(str(p)) for p in (ROOT / "params" / "accelerate").glob("*.yaml")}
    assert set(configs) == {"ddp", "zero2", "zero3_offload"}
    assert configs["ddp"].distributed_type == "MULTI_GPU"
    assert configs["zero2"].deepspeed_config["zero_stage"] == 2
    z3 = configs["zero3_offload"].deepspeed_config
    assert (z3["zero_stage"], z3["offload_optimizer_device"], z3["offload_param_device"]) == (3, "cpu", "cpu")
    assert z3["zero3_save_16bit_model"]  # the saved models load as usual


# ------------------------------------------------------------------ vLLM

def _vllm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


@pytest.mark.skipif(_vllm_installed(), reason="vllm is installed here")
def test_eval_backend_vllm_without_vllm_fails_with_one_clear_line(tiny_cfg):
    from rleif_kit.evaluation.stage import model_sources

    cfg, paths = tiny_cfg('eval.backend="vllm"', 'eval.models=["sft"]', stage="06_eval")
    paths.sft_model.mkdir(parents=True)
    (paths.sft_model / "sft_info.json").write_text(json.dumps({"finetune": "full"}))
    with pytest.raises(RuntimeError) as err:
        model_sources(cfg, paths)
    message = str(err.value)
    assert "\n" not in message and "[eval] backend = 'vllm'" in message and "pip install vllm" in message


def test_ppo_generation_backend_vllm_says_it_is_not_supported_yet(tiny_cfg):
    from rleif_kit.ppo.trainer import train_ppo

    cfg, paths = tiny_cfg('ppo.generation_backend="vllm"', stage="05_ppo")
    with pytest.raises(NotImplementedError, match="generation_backend = 'vllm' is not supported yet"):
        train_ppo(cfg, paths, pool=[], scorer=object(), policy=object())
