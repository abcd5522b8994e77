"""PPO on the tiny model: updates move every adapter and value-head weight, the reference stays the SFT
policy, resume continues from the saved step, the gate refuses a broken reward, the KL guard stops a
deliberately unstable run."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from card_checks import absolute_paths_in, front_matter, run_usage
from conftest import ROOT, TINY_PARAMS, tiny_overrides

pytestmark = pytest.mark.slow


def _run(tmp_path, small_model_dir, *extra):
    """A tiny-preset run whose 'SFT model' is the small test model; rA from the arithmetic verifier."""
    from rleif_kit.core.run_setup import setup

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(
        tmp_path / "run", "ppo.total_steps=2", "ppo.rollout_batch=8", "ppo.mini_batch=4", "ppo.gen_batch=8",
        "ppo.ppo_epochs=2", "ppo.max_new_tokens=24", "ppo.lr=1e-2", "ppo.save_every=1", "ppo.gate_samples=8",
        "ppo.lora_r=4", 'reward_model.answer_reward="verifier"', "ppo.force=true", "ppo.kl_limit=1e9", *extra),
        stage="05_ppo", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    if not (paths.sft_model / "sft_info.json").exists():
        shutil.copytree(small_model_dir, paths.sft_model, dirs_exist_ok=True)
        (paths.sft_model / "sft_info.json").write_text(json.dumps({"finetune": "full"}))
    return cfg, paths


def _pool(n=16):
    from rleif_kit.worlds.arith.problems import generate_problems

    return [{"id": p["id"], "text": p["question"], "problem": p["problem"]} for p in generate_problems(n, seed=5)]


def _scorer(cfg, paths, small_model_dir):
    from rleif_kit.rewards.reward import RewardScorer
    from rleif_kit.rewards.rm_training import load_rm_for_training

    irm = load_rm_for_training(str(small_model_dir), "sequence", cfg, False)
    return RewardScorer(cfg, paths, irm=irm)


def test_updates_move_every_trainable_weight_and_reference_stays_sft(tmp_path, small_model_dir):
    from transformers import AutoModelForCausalLM

    from rleif_kit.ppo.trainer import train_ppo
    from rleif_kit.ppo.policy import forward, load_policy

    cfg, paths = _run(tmp_path, small_model_dir)
    policy = load_policy(cfg, paths)
    before = {n: p.detach().clone() for n, p in policy.named_trainable().items()}
    policy, result = train_ppo(cfg, paths, pool=_pool(), scorer=_scorer(cfg, paths, small_model_dir), policy=policy,
                             progress=False)
    assert result.steps == 2 and len(result.log) == 2 and not result.stopped
    now = policy.named_trainable()
    unchanged = [n for n, p in before.items() if torch.equal(p, now[n].detach())]
    assert any("lora_A" in n for n in before) and any("value_head" in n for n in before)
    assert unchanged == []  # LoRA A and B, and the value head, all moved
    sft = AutoModelForCausalLM.from_pretrained(paths.sft_model)
    ids = torch.tensor([[5, 6, 7, 8]])
    ref_logits, _ = forward(policy, ids, torch.ones_like(ids), with_values=False, reference=True)
    pol_logits, _ = forward(policy, ids, torch.ones_like(ids), with_values=False)
    assert torch.allclose(ref_logits, sft(ids).logits, atol=1e-5)  # adapter off = the SFT policy, not the base
    assert not torch.allclose(pol_logits, ref_logits, atol=1e-5)
    row = result.log[-1]
    for key in ("reward_mean", "reward_std", "rI_mean", "rA_mean", "low_rA_share", "kl", "entropy", "clip_frac",
                "value_loss", "response_len", "approx_kl", "explained_variance"):
        assert key in row
    # issue 32: where the step's time went; the phases add up to the step, less the bookkeeping between them
    phases = ("generate_s", "policy_pass_s", "ref_pass_s", "reward_s", "update_s", "checkpoint_s")
    assert all(row[k] >= 0 for k in phases) and row["checkpoint_s"] > 0  # step 1's row: step 0's checkpoint
    assert 0.5 * row["step_s"] <= sum(row[k] for k in phases) <= row["step_s"] + 1e-3  # loose: a busy machine
    assert row["gen_tokens_per_s"] > 0 and row["pad_ratio"] >= 1.0 and row["approx_kl"] >= 0

    # the export: standalone weights whose card's snippet generates what the kit generates, no absolute path
    from rleif_kit.models.generation import generate
    from rleif_kit.ppo.stage import export
    from rleif_kit.worlds.prompts import math_prompt

    out = export(cfg, paths, policy, result)
    meta = front_matter(out)
    assert (meta.library_name, meta.pipeline_tag) == ("transformers", "text-generation") and "ppo" in meta.tags
    assert json.loads((out / "ppo_info.json").read_text())["sft_model"] == "../../03_sft/model"
    assert absolute_paths_in(out, tmp_path) == [] and (out / "figures" / "ppo_curves.png").exists()
    card = run_usage(out)
    exported = AutoModelForCausalLM.from_pretrained(out)
    prompt = math_prompt(card["instruction"], cot=cfg.eval.cot_prompt)
    assert card["response"] == generate(exported, policy.tokenizer, [prompt], cfg.eval.max_new_tokens,
                                        progress=False)[0]


def test_resume_continues_from_the_saved_step(tmp_path, small_model_dir):
    from rleif_kit.ppo.trainer import train_ppo

    cfg, paths = _run(tmp_path, small_model_dir)
    train_ppo(cfg, paths, pool=_pool(), scorer=_scorer(cfg, paths, small_model_dir), progress=False)
    cfg3, _ = _run(tmp_path, small_model_dir, "ppo.total_steps=3")
    policy, result = train_ppo(cfg3, paths, pool=_pool(), scorer=_scorer(cfg3, paths, small_model_dir), progress=False)
    assert result.resumed_from == 2 and result.steps == 3
    assert [r["step"] for r in result.log] == [0, 1, 2]
    assert [json.loads(line)["step"] for line in (paths.stage("05_ppo") / "log.jsonl").read_text().splitlines()] == [0, 1, 2]


def _offline_trackers(tmp_path, monkeypatch) -> list[str]:
    """report_to for a test: TensorBoard, and mlflow's local store under tmp_path where mlflow is installed."""
    try:
        import mlflow  # noqa: F401
    except ImportError:
        return ["tensorboard"]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow 3.18 wants a database; a file store suffices
    for name in ("MLFLOW_EXPERIMENT_NAME", "MLFLOW_RUN_ID", "MLFLOW_TAGS"):
        monkeypatch.delenv(name, raising=False)
    return ["tensorboard", "mlflow"]


def _mlflow_curve(run_name: str, metric: str) -> list[float]:
    """The values of ``metric`` by step in the one finished MLflow run named ``run_name``."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient()
    (run,) = [r for r in client.search_runs(["0"]) if r.info.run_name == run_name]
    assert run.info.status == "FINISHED"
    return [m.value for m in sorted(client.get_metric_history(run.info.run_id, metric), key=lambda m: m.step)]


def test_ppo_curves_reach_every_tracker_report_to_names(tmp_path, small_model_dir, monkeypatch):
    """issue 44: a short PPO run logs each step's row to the trackers [base] report_to names — TensorBoard's event
    files and, where mlflow is installed (the `test` extra), MLflow's local store — the same figures as log.jsonl.
    Before, PPO wrote TensorBoard alone and said nothing of the rest."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rleif_kit.ppo.trainer import train_ppo

    names = _offline_trackers(tmp_path, monkeypatch)
    cfg, paths = _run(tmp_path, small_model_dir, f"base.report_to={json.dumps(names)}")
    _, result = train_ppo(cfg, paths, pool=_pool(8), scorer=_scorer(cfg, paths, small_model_dir), progress=False)
    rows = [json.loads(line) for line in paths.ppo_log.read_text().splitlines()]
    assert result.steps == 2 and [r["step"] for r in rows] == [0, 1]
    events = EventAccumulator(str(paths.tensorboard("ppo")))
    events.Reload()
    for key, tag in (("reward_mean", "reward/reward_mean"), ("kl", "ppo/kl"), ("rA_mean", "reward/rA_mean"),
                     ("update_s", "time/update_s")):
        got = [(e.step, e.value) for e in events.Scalars(tag)]
        assert got == [(r["step"], pytest.approx(r[key], rel=1e-6, abs=1e-7)) for r in rows], tag
    if "mlflow" in names:
        for key, tag in (("reward_mean", "reward/reward_mean"), ("kl", "ppo/kl")):
            assert _mlflow_curve(f"{cfg.run_name}-ppo", tag) == pytest.approx([r[key] for r in rows], rel=1e-9), tag


def test_gate_refuses_a_prm_that_passes_everything(tmp_path, small_model_dir):
    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.ppo.stage import RewardGateFailed, train

    cfg, paths = _run(tmp_path, small_model_dir, "ppo.force=false")
    scorer = _scorer(cfg, paths, small_model_dir)
    scorer.answer_scores = lambda instructions, responses: [1.0] * len(responses)  # a PRM that returns 1 always
    with pytest.raises(RewardGateFailed, match="low_ra_share") as err:
        train(cfg, paths, _pool(), scorer, load_policy(cfg, paths), progress=False)
    assert {v.check: v.status for v in err.value.verdicts}["low_ra_share"] == "fail"
    assert not (paths.stage("05_ppo") / "log.jsonl").exists()  # no update was made


def test_guard_stops_on_kl_over_the_limit_or_anything_not_finite():
    from rleif_kit.ppo.trainer import guard

    row = {"step": 3, "kl": 2.0, "policy_loss": 0.1, "value_loss": 0.2, "reward_mean": 0.5}
    assert guard(row, kl_limit=10) == ""
    assert "KL 12.00 passed the limit 10" in guard({**row, "kl": 12.0}, kl_limit=10)
    # the update itself blew up: the rollout's KL (before it) is fine, the updated policy's is not
    assert "KL 12.00 passed the limit 10" in guard({**row, "kl_after": 12.0}, kl_limit=10)
    message = guard({**row, "value_loss": float("nan")}, kl_limit=10)
    assert "value_loss not finite" in message and "lower [ppo] lr" in message and "kl_coef (0.1)" in message


def test_reference_is_the_sft_adapter_merged_never_the_base(tmp_path, small_model_dir):
    """When SFT made a LoRA adapter, the PPO reference (adapter off) equals base+SFT adapter, not the base."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from rleif_kit.ppo.policy import forward, load_policy
    from rleif_kit.core.run_setup import setup
    from rleif_kit.models.loading import load_merged

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", "ppo.lora_r=4", 'sft.finetune="lora"'),
                       stage="05_ppo", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    sft = get_peft_model(AutoModelForCausalLM.from_pretrained(small_model_dir),
                         LoraConfig(r=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"))
    with torch.no_grad():
        for n, p in sft.named_parameters():
            if "lora_B" in n:
                p.normal_(std=0.5)  # a trained-looking SFT adapter (B = 0 would make it a no-op)
    sft.save_pretrained(paths.sft_model)
    (paths.sft_model / "sft_info.json").write_text(json.dumps({"finetune": "lora", "base_model": str(small_model_dir)}))
    shutil.copy(small_model_dir / "tokenizer.json", paths.sft_model / "tokenizer.json")
    shutil.copy(small_model_dir / "tokenizer_config.json", paths.sft_model / "tokenizer_config.json")
    policy = load_policy(cfg, paths)
    ids = torch.tensor([[5, 6, 7, 8, 9]])
    ref, _ = forward(policy, ids, torch.ones_like(ids), with_values=False, reference=True)
    merged, _ = load_merged(paths.sft_model)
    base = AutoModelForCausalLM.from_pretrained(small_model_dir)
    assert torch.allclose(ref, merged(ids).logits, atol=1e-4)
    assert not torch.allclose(ref, base(ids).logits, atol=1e-2)


def test_grpo_option_uses_one_callable_with_the_same_formula(tmp_path, small_model_dir, monkeypatch):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rleif_kit.ppo.stage import train
    from rleif_kit.ppo.policy import load_policy

    names = _offline_trackers(tmp_path, monkeypatch)
    cfg, paths = _run(tmp_path, small_model_dir, 'ppo.algorithm="grpo"', "ppo.num_generations=4", "ppo.total_steps=2",
                      "ppo.lr=1e-3", f"base.report_to={json.dumps(names)}")
    scorer = _scorer(cfg, paths, small_model_dir)
    calls = []
    real = scorer.answer_scores
    scorer.answer_scores = lambda ins, res: calls.append(len(res)) or real(ins, res)
    policy, result = train(cfg, paths, _pool(), scorer, load_policy(cfg, paths))
    assert calls[-2:] == [8, 8]  # one call per rollout of rollout_batch responses, after the gate's
    assert result.steps == 2 and {"reward_mean", "rI_mean", "rA_mean", "kl"} <= set(result.log[-1])
    assert policy.value_head is None and hasattr(policy.model, "disable_adapter")
    assert len((paths.stage("05_ppo") / "log.jsonl").read_text().splitlines()) == 2
    assert [r["learning_rate"] for r in result.log] == [1e-3, 1e-3]  # constant, as our PPO loop's (not decayed)
    assert all(m.p == 0 for m in policy.model.modules() if isinstance(m, torch.nn.Dropout))  # no dropout anywhere
    # issue 44: GRPO is TRL's trainer, so report_to reaches transformers' integrations; TensorBoard is the kit's
    events = EventAccumulator(str(paths.tensorboard("ppo")))
    events.Reload()
    rewards = [r["reward_mean"] for r in result.log]
    assert [e.value for e in events.Scalars("train/reward")] == pytest.approx(rewards, rel=1e-6)
    if "mlflow" in names:
        assert _mlflow_curve(f"{cfg.run_name}-ppo", "reward") == pytest.approx(rewards, rel=1e-9)


def test_grpo_scores_with_the_prm_and_logs_ra(tmp_path, small_model_dir, monkeypatch):
    """issue 45: with answer_reward = "prm" and r = rI * rA, GRPO's one reward callable runs the PRM on every
    rollout, and rA (its step scores aggregated) reaches the kit's log and TRL's, so TensorBoard, and each response's
    terms TRL's completions table."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rleif_kit.ppo.stage import train
    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.rewards.reward import RewardScorer
    from rleif_kit.rewards.rm_training import load_rm_for_training

    cfg, paths = _run(tmp_path, small_model_dir, 'ppo.algorithm="grpo"', "ppo.num_generations=4", "ppo.total_steps=2",
                      'reward_model.answer_reward="prm"', 'ppo.reward_formula="rI * rA"',
                      'base.report_to=["tensorboard"]', "ppo.trainer_args={log_completions = true}")
    prm = load_rm_for_training(str(small_model_dir), "token", cfg, False)
    passes = []
    prm[0].register_forward_hook(lambda module, args, out: passes.append(out.logits.shape[0]))
    scorer = RewardScorer(cfg, paths, irm=load_rm_for_training(str(small_model_dir), "sequence", cfg, False), prm=prm)
    given = []  # rA as the scorer gave it to GRPO, per rollout (None: no steps found, scored 0)
    real = scorer.answer_scores
    scorer.answer_scores = lambda ins, res: given.append([0.0 if a is None else a for a in real(ins, res)]) or real(
        ins, res)
    _, result = train(cfg, paths, _pool(), scorer, load_policy(cfg, paths), gate=[])  # the gate has tests of its own
    assert result.steps == 2 and 0 < sum(passes) <= 16  # the PRM read the two rollouts (8 each) where it found steps
    assert len(given) == 2 and any(a != 0.0 for ra in given for a in ra)  # scored, not all flagged
    logged = [r["rA_mean"] for r in result.log]
    assert logged == pytest.approx([sum(ra) / len(ra) for ra in given], rel=1e-6)
    events = EventAccumulator(str(paths.tensorboard("ppo")))
    events.Reload()
    assert [e.value for e in events.Scalars("train/rA_mean")] == pytest.approx(logged, rel=1e-6)
    import pandas  # TRL's completions table of the last rollout: each response's rI and rA beside its reward

    table = pandas.read_parquet(sorted((paths.grpo_dir / "completions").glob("*.parquet"))[-1])
    assert list(table["rA"]) == pytest.approx(given[-1], rel=1e-6)
    assert list(table["rleif_reward"]) == pytest.approx(list(table["rI"] * table["rA"]), rel=1e-5)


def test_gradient_checkpointing_gives_the_same_update(tmp_path, small_model_dir):
    """Recomputing activations (what lets 7B PPO fit 24 GB) must not change the gradients."""
    from rleif_kit.ppo.policy import forward, load_policy

    grads = []
    for ckpt in ("false", "true"):
        cfg, paths = _run(tmp_path / ckpt, small_model_dir, "ppo.lora_r=4", f"sft.gradient_checkpointing={ckpt}")
        policy = load_policy(cfg, paths)
        policy.model.train()
        ids = torch.tensor([[5, 6, 7, 8, 9, 10]])
        logits, values = forward(policy, ids, torch.ones_like(ids))
        (logits.float().logsumexp(-1).mean() + values.mean()).backward()
        grads.append({n: p.grad.clone() for n, p in policy.named_trainable().items() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 2
    assert all(torch.allclose(grads[0][n], grads[1][n], atol=1e-6) for n in grads[0])


def test_update_passes_run_without_dropout(tmp_path, small_model_dir):
    """A checkpoint with dropout: the update's log-probs must be the rollout's until the weights move, so with
    a learning rate of 0 every ratio is exactly 1 (no clipping) and the KL after the update is the rollout's."""
    from rleif_kit.ppo.policy import load_policy, prepare
    from rleif_kit.ppo.trainer import generate_rollout, ppo_step, score_rollout

    cfg, paths = _run(tmp_path, small_model_dir)
    config = json.loads((paths.sft_model / "config.json").read_text())
    (paths.sft_model / "config.json").write_text(json.dumps({**config, "attention_dropout": 0.5}))  # trained with it
    policy = load_policy(cfg, paths)
    assert [m for m in policy.model.modules() if hasattr(m, "attention_dropout")]
    torch.manual_seed(0)
    roll = generate_rollout(policy, [p["text"] for p in _pool(8)], cfg)
    score_rollout(policy, roll, mini_batch=4)
    optimizer = prepare(policy, torch.optim.AdamW(policy.parameters(), lr=0.0))
    out = ppo_step(policy, optimizer, roll, {"reward": [1.0, 0.0] * 4}, cfg, kl_coef=0.0)
    assert out["clip_frac"] == 0.0
    mask = roll.response_mask
    log_rho = roll.ref_logp - roll.logp  # lr 0: the policy is the old one, so kl_after is k3 on its own samples
    assert out["kl_after"] == pytest.approx(((log_rho.exp() - 1 - log_rho) * mask).sum(1).mean().item(), abs=1e-5)


def test_rollouts_ignore_the_checkpoints_own_sampling_settings(tmp_path, small_model_dir):
    """A checkpoint's generation_config.json (a repetition_penalty, a min_new_tokens) must not reach PPO's
    sampler: its log-probs are those of softmax(logits / T), so the samples must come from that too."""
    from transformers import GenerationConfig

    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.ppo.trainer import generate_rollout

    cfg, paths = _run(tmp_path, small_model_dir)
    policy = load_policy(cfg, paths)
    prompts = [p["text"] for p in _pool(4)]
    inner = policy.model.get_base_model()
    plain = inner.generation_config
    inner.generation_config = GenerationConfig(**{**plain.to_dict(), "repetition_penalty": 3.0, "no_repeat_ngram_size": 2})
    torch.manual_seed(0)
    roll = generate_rollout(policy, prompts, cfg)
    assert inner.generation_config.repetition_penalty == 3.0  # the checkpoint's config is put back afterwards
    tok = policy.tokenizer
    enc = tok(prompts, return_tensors="pt", padding=True)
    inner.generation_config = GenerationConfig(bos_token_id=plain.bos_token_id, eos_token_id=plain.eos_token_id,
                                               pad_token_id=plain.pad_token_id)
    torch.manual_seed(0)  # the same draws from the plain distribution
    with torch.no_grad():
        out = policy.model.generate(**enc, do_sample=True, temperature=cfg.ppo.temperature, top_p=1.0, top_k=0,
                                    max_new_tokens=cfg.ppo.max_new_tokens, pad_token_id=tok.pad_token_id,
                                    eos_token_id=tok.eos_token_id)
    new = out[:, enc["input_ids"].shape[1]:]
    mask = roll.response_mask.bool()
    T = mask.shape[1]
    assert torch.equal(new[:, :T][mask], roll.input_ids[:, roll.prompt_width:][mask])


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_rollout_logprobs_are_those_of_the_sampling_distribution(tmp_path, small_model_dir, temperature):
    """PPO's old log-probs must be the behaviour policy's: at temperature T that is softmax(logits / T), the
    distribution generate() sampled from (the scores it reports), not softmax(logits)."""
    from rleif_kit.ppo.trainer import generate_rollout, score_rollout
    from rleif_kit.ppo.policy import load_policy

    cfg, paths = _run(tmp_path, small_model_dir, f"ppo.temperature={temperature}")
    policy = load_policy(cfg, paths)
    prompts = [p["text"] for p in _pool(4)]
    torch.manual_seed(0)
    roll = generate_rollout(policy, prompts, cfg)
    score_rollout(policy, roll, mini_batch=4)
    tok = policy.tokenizer
    enc = tok(prompts, return_tensors="pt", padding=True)
    torch.manual_seed(0)  # the same draws again, now with the sampler's processed scores
    with torch.no_grad():
        out = policy.model.generate(**enc, do_sample=True, temperature=temperature, top_p=1.0, top_k=0,
                                    max_new_tokens=cfg.ppo.max_new_tokens, pad_token_id=tok.pad_token_id,
                                    eos_token_id=tok.eos_token_id, output_scores=True, return_dict_in_generate=True)
    new = out.sequences[:, enc["input_ids"].shape[1]:]
    sampler = torch.log_softmax(torch.stack(out.scores, dim=1), dim=-1).gather(-1, new.unsqueeze(-1)).squeeze(-1)
    mask = roll.response_mask.bool()
    T = mask.shape[1]
    assert torch.equal(new[:, :T][mask], roll.input_ids[:, roll.prompt_width:][mask])  # the same samples
    assert torch.allclose(roll.logp[mask], sampler[:, :T][mask], atol=1e-4)
    assert torch.allclose(roll.ref_logp[mask], roll.logp[mask], atol=1e-5)  # a fresh adapter is the SFT policy


def test_trimmed_passes_compute_the_untrimmed_values_on_fewer_tokens(tmp_path, small_model_dir):
    """[ppo] trim_padding (issue 32): each pass computes only the columns its rows use, the passes without gradient
    over rows grouped by length; log-probs, values, entropy and the update's losses are those of the full-width
    passes, and the update computes fewer tokens."""
    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.ppo.trainer import generate_rollout, ppo_step, score_rollout

    cfg, paths = _run(tmp_path, small_model_dir, "ppo.ppo_epochs=1")
    policy = load_policy(cfg, paths)
    prompts = [p["text"] * (1 + i % 3) for i, p in enumerate(_pool(8))]  # prompts of three lengths
    torch.manual_seed(0)
    roll = generate_rollout(policy, prompts, cfg)
    results = {}
    for trim in (False, True):
        roll.trim = trim
        score_rollout(policy, roll, mini_batch=4)
        results[trim] = (roll.logp.clone(), roll.ref_logp.clone(), roll.values.clone(), roll.entropy)
    mask = roll.response_mask.bool()
    for full, trimmed in zip(results[False][:3], results[True][:3]):
        assert torch.allclose(full[mask], trimmed[mask], atol=1e-5)
    assert results[True][3] == pytest.approx(results[False][3], abs=1e-5)
    steps = {}
    for trim in (False, True):
        roll.trim = trim
        state = {n: p.detach().clone() for n, p in policy.named_trainable().items()}
        torch.manual_seed(1)  # the same minibatches
        optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-3)
        steps[trim] = ppo_step(policy, optimizer, roll, {"reward": [1.0, 0.0] * 4}, cfg, kl_coef=0.0)
        with torch.no_grad():
            for n, p in policy.named_trainable().items():
                p.copy_(state[n])  # back to where the other variant started
    for key in ("policy_loss", "value_loss", "approx_kl"):
        assert steps[True][key] == pytest.approx(steps[False][key], abs=1e-5)
    assert steps[True]["computed_tokens"] < steps[False]["computed_tokens"]


def test_a_loss_that_is_not_finite_stops_the_run_with_the_guards_advice(tmp_path, small_model_dir, monkeypatch):
    """A blown-up update returns early; the loop must still write its row and stop with the KL guard's advice."""
    from rleif_kit.ppo import ppo_math
    from rleif_kit.ppo.trainer import train_ppo

    cfg, paths = _run(tmp_path, small_model_dir)
    real = ppo_math.policy_loss
    monkeypatch.setattr(ppo_math, "policy_loss", lambda *a, **k: (real(*a, **k)[0] * float("nan"), torch.tensor(0.0)))
    _, result = train_ppo(cfg, paths, pool=_pool(), scorer=_scorer(cfg, paths, small_model_dir), progress=False)
    assert "policy_loss, value_loss not finite" in result.stopped and "lower [ppo] lr" in result.stopped
    assert result.steps == 0 and len(result.log) == 1
