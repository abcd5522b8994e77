"""Stage 05 around the loop: the choice of algorithm (our PPO or TRL's GRPO, both behind the reward-health
gate of ``ppo.reward_gate``, re-exported here for the notebook), the SFT-vs-PPO A/B on held-out problems,
the export with a model card, and ``python -m rleif_kit.ppo``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from rleif_kit import distributed as dist
from rleif_kit.config import RunConfig
from rleif_kit.diagnostics import Verdict
from rleif_kit.jsonl import write_jsonl
from rleif_kit.paths import RunPaths
from rleif_kit.ppo import STAGE, PPOResult, reward_gate, run_ppo
from rleif_kit.ppo_policy import Policy
from rleif_kit.ppo_rewards import RewardGateFailed, RewardScorer, load_gate, raise_if_failed, save_gate


def needs_gate(paths: RunPaths) -> bool:
    """The gate runs before the first update only: not when resuming from a checkpoint."""
    from rleif_kit.ppo_policy import last_checkpoint

    return last_checkpoint(paths.stage(STAGE) / "checkpoints") is None


def export(cfg: RunConfig, paths: RunPaths, policy: Policy, result: PPOResult, extra: str = "") -> Path:
    """Write the PPO policy as standalone weights with a model card; the Policy is merged (unusable) after."""
    from rleif_kit.ppo_policy import export_policy

    ppo, last = cfg.ppo, (result.log[-1] if result.log else {})
    out = paths.stage(STAGE) / "model"
    if not dist.is_main():
        return out
    card = (f"# PPO policy (RLEIF)\n\nThe SFT model after {result.steps} PPO steps (reward `{ppo.reward_formula}`, "
            f"rA from {cfg.reward_model.answer_reward}, aggregate {cfg.reward_model.prm_aggregate}); adapter r="
            f"{ppo.lora_r} merged. lr {ppo.lr}, kl_coef {ppo.kl_coef}, clip {ppo.clip_range}, rollout {ppo.rollout_batch}, "
            f"mini-batch {ppo.mini_batch}, {ppo.ppo_epochs} epochs per batch.\nLast step: reward "
            f"{last.get('reward_mean', float('nan')):.3f}, KL {last.get('kl', float('nan')):.2f}.\n{extra}")
    export_policy(policy, out, card)
    (out / "ppo_info.json").write_text(json.dumps({"steps": result.steps, "stopped": result.stopped}) + "\n")
    result.model_dir = out
    return out


def train(cfg: RunConfig, paths: RunPaths, pool: Sequence[dict], scorer: RewardScorer, policy: Policy,
          gate: list[Verdict] | None = None, progress: bool = True) -> tuple[Policy, PPOResult]:
    """``[ppo].algorithm``: our PPO loop, or TRL's GRPOTrainer with the same reward (behind the same gate).
    With ``[base].launcher = "accelerate"`` the loop runs in launched processes, which read the pool and the
    reward models from the run's files as ``python -m rleif_kit.ppo`` does (``pool`` is not passed on and
    ``scorer`` frees its models first), and ``policy`` gets its trained adapter from the last checkpoint."""
    from rleif_kit.launch import should_launch

    if should_launch(cfg):
        scorer.close()  # the launched ranks load their own reward models
        return _launched(cfg, paths, policy, gate)
    if cfg.ppo.algorithm == "ppo":
        return run_ppo(cfg, paths, pool, scorer, policy, gate, progress)
    from rleif_kit.grpo import run_grpo

    gate = gate if gate is not None else reward_gate(cfg, policy, scorer, pool)
    raise_if_failed(gate, cfg.ppo.force)
    model, tokenizer, result = run_grpo(cfg, paths, pool, scorer, progress)
    result.gate = gate
    if dist.is_main():
        write_jsonl(paths.stage(STAGE) / "log.jsonl", result.log)
    return Policy(model, None, tokenizer), result


def _launched(cfg: RunConfig, paths: RunPaths, policy: Policy, gate: list[Verdict] | None) -> tuple[Policy, PPOResult]:
    """``python -m rleif_kit.ppo`` under accelerate launch (the notebook's gate passed on, no export: the
    notebook exports), then the trained adapter of the last checkpoint into ``policy``."""
    from rleif_kit.launch import load_result, maybe_launch
    from rleif_kit.ppo_policy import last_checkpoint, load_checkpoint

    if cfg.ppo.algorithm != "ppo":
        raise ValueError("[base] launcher = \"accelerate\" runs our PPO loop only; for GRPO run "
                         "`accelerate launch -m rleif_kit.ppo --params FILE` from a shell (TRL handles the ranks)")
    stage, args = paths.stage(STAGE), ["--no-export"]
    raise_if_failed(gate or [], cfg.ppo.force)
    if gate:
        save_gate(stage / "gate.json", gate)
        args += ["--gate", str(stage / "gate.json")]
    maybe_launch(cfg, "rleif_kit.ppo", args=args)
    result = load_result(PPOResult, stage / "result.json")
    good = last_checkpoint(stage / "checkpoints")
    if good is not None:
        load_checkpoint(policy, None, good)
    return policy, result


def heldout_ab(cfg: RunConfig, paths: RunPaths, policy: Policy) -> dict[str, Any]:
    """SFT (adapter off) and PPO policy, greedy, on the first ``[ppo].eval_samples`` held-out arithmetic
    problems: per-item correctness of each, and the A/B verdict (paired bootstrap)."""
    from rleif_kit.diagnostics import check_ab
    from rleif_kit.evaluation.arith_bench import evaluate_arith
    from rleif_kit.sft_data import heldout_problems

    problems = heldout_problems(cfg, paths)[: cfg.ppo.eval_samples]
    kw = dict(cot=cfg.eval.cot_prompt, max_new_tokens=cfg.eval.max_new_tokens, batch_size=cfg.eval.batch_size)
    stage = paths.stage(STAGE)
    with policy.model.disable_adapter():
        sft = evaluate_arith(policy.model, policy.tokenizer, problems, out_path=stage / "eval_sft.jsonl",
                             desc="held-out (SFT)", **kw)
    ppo = evaluate_arith(policy.model, policy.tokenizer, problems, out_path=stage / "eval_ppo.jsonl",
                         desc="held-out (PPO)", **kw)
    verdict = check_ab([r["correct"] for r in sft["rows"]], [r["correct"] for r in ppo["rows"]], cfg.diagnostics,
                       f"{STAGE}/eval_sft.jsonl vs eval_ppo.jsonl", seed=cfg.base.seed)
    return {"n": len(problems), "sft_accuracy": sft["accuracy"], "ppo_accuracy": ppo["accuracy"], "verdict": verdict}


def fifth_means(log: Sequence[dict], key: str = "reward_mean") -> tuple[float, float]:
    """Mean of ``key`` over the first and the last fifth of the steps (at least one step each)."""
    k = max(1, len(log) // 5)
    first, last = [r[key] for r in log[:k]], [r[key] for r in log[-k:]]
    return sum(first) / len(first), sum(last) / len(last)


def main(argv: list[str] | None = None) -> None:
    """``python -m rleif_kit.ppo --params FILE``: stage 05 without a notebook."""
    import argparse

    from rleif_kit.diagnostics import format_verdicts
    from rleif_kit.ppo_policy import load_policy
    from rleif_kit.reward_stage import instruction_pool
    from rleif_kit.setup import setup

    parser = argparse.ArgumentParser(description="Run PPO (or GRPO) without a notebook.")
    parser.add_argument("--params", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--gate", default=None, help="gate.json of a gate already run (skips running it again)")
    parser.add_argument("--no-export", action="store_true", help="leave 05_ppo/model and the KL-guard verdict "
                                                                "to the caller (a notebook)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=STAGE)
    dist.accelerator()  # under accelerate launch: join the ranks and pick this rank's GPU before loading models
    policy = load_policy(cfg, paths)
    gate = load_gate(Path(args.gate)) if args.gate else None
    try:
        policy, result = train(cfg, paths, instruction_pool(cfg, paths), RewardScorer(cfg, paths), policy, gate,
                               progress=True)
    except RewardGateFailed as e:
        print(format_verdicts(e.verdicts))
        raise SystemExit(f"ppo: {e}") from None
    if dist.is_main():
        from rleif_kit.launch import save_result

        save_result(result, paths.stage(STAGE) / "result.json")  # what a notebook with launcher = accelerate reads
        print(format_verdicts(result.gate))
    if args.no_export:  # a notebook reads result.json (a KL-guard stop included) and exports itself
        return
    if result.stopped:
        raise SystemExit(f"ppo: {result.stopped}")
    model = export(cfg, paths, policy, result)
    if dist.is_main():
        print(f"PPO done: {result.steps} steps in {result.runtime_s:.0f}s; model at {model}")


if __name__ == "__main__":
    main()

