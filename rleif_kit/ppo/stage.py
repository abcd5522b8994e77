"""Stage 05 whole, ``run_ppo(cfg, paths)``: what the notebook and ``python -m rleif_kit.ppo`` both call.

Around the loop (``trainer.py``), in the order a run meets them: the reward-health gate before the first update
(``reward_gate``: what the reward reads on the SFT policy's own samples, and the counterfactual probes of r and rI on
the world's held-out problems; a fail stops PPO unless ``[ppo] force``, the verdicts go to ``05_ppo/gate.json``); the
choice of algorithm (our PPO loop, or TRL's GRPO behind the same gate); the SFT-vs-PPO A/B on held-out problems; the
export with the model card (the SFT model after RLEIF's PPO with the reward ``[ppo] reward_formula``, as standalone
transformers weights, the PPO adapter merged: its settings, last-step figures and a generation snippet;
``models/cards.py`` renders it); and the looks at the run the notebook shows.
"""

from __future__ import annotations

import json
import os
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.checks.probe_sets import NO_PROBE_SET, instruction_probe_pairs, probe_solutions
from rleif_kit.checks.probes import check_reward_truth, irm_probes, prm_probes
from rleif_kit.checks.verdicts import (
    check_ab,
    check_low_ra_share,
    check_reward_terms,
    check_score_distribution,
    check_step_credit,
    check_value_head,
    format_verdicts,
)
from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.launch import load_result, maybe_launch, should_launch
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_gain, plot_ppo_curves, plot_ppo_phases, plot_update_diagnostics, save_figure
from rleif_kit.core.stages import PPO
from rleif_kit.core.tables import Note, missing, text_table
from rleif_kit.core.user_files import parse_json, read_user_text
from rleif_kit.core.verdict import Verdict
from rleif_kit.models.cards import (ModelCard, generation_usage, hub_id, recipe_tags, render, save_figures,
                                    template_opener)
from rleif_kit.models.refs import model_ref
from rleif_kit.ppo import step_credit
from rleif_kit.ppo.grpo import run_grpo
from rleif_kit.ppo.policy import VALUE_HEAD, Policy, export_policy, last_checkpoint, load_checkpoint, load_policy
from rleif_kit.ppo.trainer import TERMS, PPOResult, check_can_start, generate_rollout, train_ppo
from rleif_kit.rewards.reward import RewardScorer
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import heldout_problems, instruction_pool
from rleif_kit.worlds.heldout_eval import evaluate_heldout
from rleif_kit.worlds.before_after import before_after_table
from rleif_kit.worlds.intros import stage_intro
from rleif_kit.worlds.words import run_words

# The stage's public face: what the notebook uses besides setup and record, the looks defined elsewhere (the plots,
# the verdict table) included.
__all__ = ["stage_intro", "run_ppo", "ab_summary", "before_after", "PPOStage", "fifth_means", "truth_fifths",
           "step_timing", "rollout_table", "format_verdicts", "plot_ppo_curves", "plot_update_diagnostics",
           "plot_ppo_phases", "plot_gain", "run_words", "save_figure"]


@dataclass
class PPOStage:
    """What stage 05 made: the loop's result (its log, steps, why it stopped, the gate's verdicts), the held-out A/B
    and the exported model."""

    result: PPOResult
    ab: dict[str, Any] | None = None  # heldout_ab's figures and verdict; None without a held-out benchmark
    model_dir: Path | None = None  # None when the KL guard stopped the run, or the export was left to the caller
    value: Verdict | None = None  # the value head's explained variance (check_value_head); None without one

    @property
    def gate(self) -> list[Verdict]:
        return self.result.gate

    @property
    def verdicts(self) -> list[Verdict]:
        """The gate's verdicts, the value head's and the A/B's."""
        return self.gate + ([self.value] if self.value else []) + ([self.ab["verdict"]] if self.ab else [])


def run_ppo(cfg: RunConfig, paths: RunPaths, gate: list[Verdict] | None = None, evaluate: bool = True,
            export_model: bool = True, progress: bool = True) -> PPOStage:
    """Stage 05: the SFT policy, the reward models and the instruction pool; the reward-health gate before the first
    update (not when resuming from a checkpoint, nor when ``gate`` is given); ``[ppo] algorithm``'s training
    (``train``); the SFT-vs-PPO A/B on held-out problems (``evaluate``, where the world has a held-out benchmark and
    ``[ppo] eval_samples`` > 0); the export with its card (``export_model``) unless the KL guard stopped the run.

    Raises RewardGateFailed when a gate check fails and ``[ppo].force`` is off (``05_ppo/gate.json`` has them)."""
    if cfg.ppo.algorithm == "ppo":
        check_can_start(cfg)  # before minutes of sampling for the gate
    policy = load_policy(cfg, paths)
    scorer = RewardScorer(cfg, paths)
    pool = instruction_pool(cfg, paths)
    if progress:
        print(f"{len(pool)} instructions; rA from {cfg.reward_model.answer_reward}; reward = {cfg.ppo.reward_formula}")
    if gate is None and (cfg.ppo.algorithm != "ppo" or needs_gate(paths)):  # GRPO keeps no PPO checkpoint
        gate = reward_gate(cfg, paths, policy, scorer, pool)
        if progress and any(v.status == "fail" for v in gate) and not cfg.ppo.force:
            print(format_verdicts(gate))  # the whole table before the stop, whose message names the fails only
    policy, result = train(cfg, paths, pool, scorer, policy, gate if gate is not None else [], progress)
    stage = PPOStage(result, value=check_value_head(result.log, cfg.diagnostics, cfg.ppo, paths.rel(paths.ppo_log)))
    if evaluate and world_for(cfg).heldout_benchmark and cfg.ppo.eval_samples:
        stage.ab = heldout_ab(cfg, paths, policy)
    if export_model and not result.stopped:
        stage.model_dir = export(cfg, paths, policy, result)
    return stage


def needs_gate(paths: RunPaths) -> bool:
    """The gate runs before the first update only: not when resuming from a checkpoint."""
    return last_checkpoint(paths.ppo_checkpoints) is None


def export(cfg: RunConfig, paths: RunPaths, policy: Policy, result: PPOResult) -> Path:
    """Write the PPO policy as standalone weights with a model card (``build_card``, below) and ``ppo_info.json``; the
    Policy is merged (unusable) after."""
    out = paths.ppo_model
    if not dist.is_main():
        return out
    card = render(build_card(cfg, paths, result, card_example(paths)))
    export_policy(policy, out, card)
    info = {"steps": result.steps, "stopped": result.stopped, "algorithm": cfg.ppo.algorithm,
            "sft_model": model_ref(paths.sft_model, out, paths.output_dir)}
    write_json_atomic(out / PPO_INFO, info)  # written last, whole: 06 reads it as "this folder is done"
    result.model_dir = out
    return out


def train(cfg: RunConfig, paths: RunPaths, pool: Sequence[dict], scorer: RewardScorer, policy: Policy,
          gate: list[Verdict] | None = None, progress: bool = True) -> tuple[Policy, PPOResult]:
    """``[ppo].algorithm``: our PPO loop, or TRL's GRPOTrainer with the same reward (behind the same gate).
    With ``[base].launcher = "accelerate"`` the loop runs in launched processes, which read the pool and the
    reward models from the run's files as ``python -m rleif_kit.ppo`` does (``pool`` is not passed on and
    ``scorer`` frees its models first), and ``policy`` gets its trained adapter from the last checkpoint."""
    if should_launch(cfg):
        scorer.close()  # the launched ranks load their own reward models
        return _launched(cfg, paths, policy, gate)
    if cfg.ppo.algorithm == "ppo":
        gate = checked_gate(cfg, paths, policy, scorer, pool, gate)
        return train_ppo(cfg, paths, pool, scorer, policy, gate, progress)

    gate = gate if gate is not None else reward_gate(cfg, paths, policy, scorer, pool)
    raise_if_failed(gate, cfg.ppo.force)
    model, tokenizer, result = run_grpo(cfg, paths, pool, scorer, progress)
    result.gate = gate
    if dist.is_main():
        write_jsonl(paths.ppo_log, result.log)
    return Policy(model, None, tokenizer), result


def _launched(cfg: RunConfig, paths: RunPaths, policy: Policy, gate: list[Verdict] | None) -> tuple[Policy, PPOResult]:
    """``python -m rleif_kit.ppo`` under accelerate launch (the notebook's gate passed on, no export: the
    notebook exports), then the trained adapter of the last checkpoint into ``policy``."""
    if cfg.ppo.algorithm != "ppo":
        raise ValueError("[base] launcher = \"accelerate\" runs our PPO loop only; for GRPO run "
                         "`accelerate launch -m rleif_kit.ppo --params FILE` from a shell (TRL handles the ranks)")
    args = ["--no-export"]
    raise_if_failed(gate or [], cfg.ppo.force)
    if gate:
        save_gate(paths.ppo_gate, gate)
        args += ["--gate", str(paths.ppo_gate)]
    maybe_launch(cfg, "rleif_kit.ppo", args=args)
    result = load_result(PPOResult, paths.ppo_result)
    good = last_checkpoint(paths.ppo_checkpoints)
    if good is not None:
        load_checkpoint(policy, None, good)
    return policy, result


# ------------------------------------------------------------------ the reward-health gate, before the first update

class RewardGateFailed(RuntimeError):
    def __init__(self, verdicts: Sequence[Verdict]):
        self.verdicts = list(verdicts)
        bad = "; ".join(f"{v.check}: {v.advice}" for v in self.verdicts if v.status == "fail")
        super().__init__(f"the reward-health gate failed, PPO not started (set [ppo] force = true to override): {bad}")


def raise_if_failed(gate: Sequence[Verdict], force: bool) -> None:
    """The gate's decision, wherever PPO or GRPO starts: any fail stops it unless ``[ppo].force``."""
    if any(v.status == "fail" for v in gate) and not force:
        raise RewardGateFailed(gate)


def save_gate(path: Path, gate: Sequence[Verdict]) -> None:
    """``05_ppo/gate.json``: the gate's verdicts (also how the notebook hands its gate to launched ranks)."""
    write_json_atomic(path, [v.to_dict() for v in gate])


def load_gate(path: Path) -> list[Verdict]:
    """The verdicts a gate run wrote (``--gate FILE``: a file the user names, read as core/user_files reads one)."""
    try:
        return [Verdict(**v) for v in parse_json(read_user_text(path, "--gate", "a gate.json"), str(path))]
    except (json.JSONDecodeError, TypeError) as exc:
        raise ValueError(f"--gate {path}: not a gate.json written by 05_ppo ({exc})") from None


def reward_gate(cfg: RunConfig, paths: RunPaths, policy: Policy, scorer: RewardScorer,
                pool: Sequence[dict]) -> list[Verdict]:
    """Reward-health checks on ``gate_samples`` responses of the SFT policy (adapter off), then what the reward
    reads: check 1 (distributions), check 2 (share of rA < 0.5), reward against truth on those responses where
    a verifier judges them, the verifiable terms' coverage (rV, rF, where the formula names them), and the
    counterfactual probes of the whole reward r and of rI on the world's held-out problems.

    With rA from the step verifier (``answer_reward = "verifier"``) there is no PRM to check: rA is 0 or 1
    and its distribution is the policy's accuracy, so check 1 covers the IRM alone (the probes still run: they
    show the reward PPO gets reads the answer). A formula without rA (``"rI * rV"``, code's execution reward)
    does not read the PRM at all: checks 1 and 2 of rA are left to 07, which probes the PRM whatever PPO reads."""
    d = cfg.diagnostics
    sample = random.Random(cfg.base.seed + 7).sample(list(pool), min(cfg.ppo.gate_samples, len(pool)))
    with policy.model.disable_adapter():
        prompts = [scorer.world.prompt_for(r, cot=cfg.eval.cot_prompt) for r in sample]
        roll = generate_rollout(policy, prompts, cfg)
    scores = scorer(sample, roll.responses)
    src = f"{PPO} gate: {len(sample)} SFT responses"
    answer = cfg.reward_model.answer_reward
    reads_ra = "rA" in scorer.formula.terms
    verdicts = [check_score_distribution("IRM", scores["rI"], d, src)]
    if answer == "prm" and reads_ra:
        verdicts.append(check_score_distribution("PRM", scores["rA"], d, src))
    if reads_ra:
        verdicts.append(check_low_ra_share(scores["rA"], d, f"{src}, rA from the {answer}"))
    if scorer.step_level:  # the parts of r on the sampled tokens, as the first update will place them
        dense, placement = step_credit.credit_tensor(policy.tokenizer, roll, scores)
        gaps = [abs(x - r) for x, r in zip(dense.sum(dim=1).tolist(), scores["reward"])]
        verdicts.append(check_step_credit([len(c) for c in scores["step_credits"]], placement["steps_placed_share"],
                                          gaps, f"{src}, r split over the steps"))
    terms = check_reward_terms(scores, f"{src}, r = {cfg.ppo.reward_formula}")
    verdicts += [terms] if terms is not None else []
    if any(c is not None for c in scores["correct"]):
        verdicts.append(check_reward_truth(scores["correct"], scores["reward"], scores["rA"], d,
                                           f"{src}, judged by the verifier", "On the SFT policy's samples"))
    held = f"{PPO} gate: {scorer.world.probe_source(paths)}"
    solutions = probe_solutions(cfg, paths)
    if not solutions:
        return verdicts + [Verdict("probes", "warn", {}, {}, f"Not probed: {NO_PROBE_SET}.", held)]
    how = f"with rA from the {answer}" if reads_ra else "(no rA)"
    verdicts += prm_probes(_reward_of(scorer), solutions, d, f"{held}, r = {cfg.ppo.reward_formula} {how}",
                           seed=cfg.base.seed, model="PRM" if answer == "prm" and reads_ra else "verifier",
                           edits=scorer.world.solution_edits)
    if scorer.step_level and "corrupt_step" in scorer.world.solution_edits:  # where the step level puts the blame
        verdicts += prm_probes(_first_step_part(scorer), solutions, d, f"{held}, the part of r credited to step 1",
                               seed=cfg.base.seed, model="step",
                               edits={"corrupt_step": scorer.world.solution_edits["corrupt_step"]})
    verdicts += irm_probes(scorer.instruction_texts, instruction_probe_pairs(cfg, paths), d, held, seed=cfg.base.seed)
    return verdicts


def _first_step_part(scorer: RewardScorer):
    """The part of r the step level credits to a solution's first step (None where no step is found): with the
    first step's result corrupted it must drop, or the step level puts the blame for the mistake elsewhere."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        ri = scorer.instruction_texts([r["text"] for r in records])
        parts = scorer.split(records, solutions, ri, scorer.answer_steps(records, solutions),
                             scorer.verifiable_terms(records, solutions))["step_credits"]
        return [p[0] if p else None for p in parts]
    return score


def _reward_of(scorer: RewardScorer):
    """The whole reward r = formula(rI, rA) of (record, solution) pairs, the question's rI fixed: what PPO
    optimises, so a formula that ignores rA fails the answer probes too."""
    ri_cache: dict[str, float] = {}

    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        texts = [r["text"] for r in records]
        new = [t for t in dict.fromkeys(texts) if t not in ri_cache]
        ri_cache.update(zip(new, scorer.instruction_texts(new) if new else []))
        ra = scorer.answer_scores(records, solutions) if "rA" in scorer.formula.terms else [0.0] * len(records)
        terms = scorer.verifiable_terms(records, solutions)
        r = scorer.combine([ri_cache[t] for t in texts], [0.0 if a is None else a for a in ra], terms)
        return [None if a is None else x for a, x in zip(ra, r)]
    return score


def checked_gate(cfg: RunConfig, paths: RunPaths, policy: Policy, scorer: RewardScorer, pool: Sequence[dict],
                 gate: list[Verdict] | None) -> list[Verdict]:
    """The gate before the first update (none when resuming from a checkpoint): run unless ``gate`` is given, saved to
    ``05_ppo/gate.json``; a fail on any rank stops PPO here unless ``[ppo].force`` (RewardGateFailed)."""
    if not needs_gate(paths):
        return []
    gate = gate if gate is not None else reward_gate(cfg, paths, policy, scorer, pool)
    if dist.is_main():
        save_gate(paths.ppo_gate, gate)
    if dist.any_rank(any(v.status == "fail" for v in gate)):
        raise_if_failed(gate, cfg.ppo.force)
    return gate


def heldout_ab(cfg: RunConfig, paths: RunPaths, policy: Policy) -> dict[str, Any]:
    """SFT (adapter off) and PPO policy, greedy, on the first ``[ppo].eval_samples`` held-out items of the world
    (a world with its own held-out split): per-item correctness of each, and the A/B verdict (paired bootstrap)."""
    problems = heldout_problems(cfg, paths)[: cfg.ppo.eval_samples]
    world = world_for(cfg)
    with policy.model.disable_adapter():
        sft = evaluate_heldout(world, policy.model, policy.tokenizer, problems, cfg.eval,
                               out_path=paths.ppo_heldout("sft"), desc="held-out (SFT)")
    ppo = evaluate_heldout(world, policy.model, policy.tokenizer, problems, cfg.eval, out_path=paths.ppo_heldout("ppo"),
                           desc="held-out (PPO)")
    verdict = check_ab([r["correct"] for r in sft["rows"]], [r["correct"] for r in ppo["rows"]], cfg.diagnostics,
                       f"{paths.rel(paths.ppo_heldout('sft'))} vs {paths.ppo_heldout('ppo').name}", seed=cfg.base.seed)
    return {"n": len(problems), "sft_accuracy": sft["accuracy"], "ppo_accuracy": ppo["accuracy"], "verdict": verdict}


def fifth_means(log: Sequence[dict], key: str = "reward_mean") -> tuple[float, float]:
    """Mean of ``key`` over the first and the last fifth of the steps (at least one step each)."""
    k = max(1, len(log) // 5)
    first, last = [r[key] for r in log[:k]], [r[key] for r in log[-k:]]
    return sum(first) / len(first), sum(last) / len(last)


def truth_fifths(log: Sequence[dict], key: str = "r_truth_auc") -> tuple[float | None, float | None]:
    """Reward against truth before and after: the mean of ``key`` over the first and the last fifth of the steps
    that have it (None when no step has: no verifier, or every batch all right or all wrong)."""
    rows = [r[key] for r in log if r.get(key) is not None]
    if not rows:
        return None, None
    k = max(1, len(rows) // 5)
    return sum(rows[:k]) / k, sum(rows[-k:]) / k


def step_timing(log: Sequence[dict]) -> dict[str, float | None]:
    """The median step's seconds, the median seconds the world's verifier took (the sandbox, for code) and its
    share of all step time (None for a log without timings: one written before they were logged)."""
    rows = [r for r in log if r.get("step_s")]
    if not rows:
        return {"step_s": None, "verify_s": None, "verify_share": None}
    verify = [r.get("verify_s", 0.0) for r in rows]
    return {"step_s": statistics.median(r["step_s"] for r in rows), "verify_s": statistics.median(verify),
            "verify_share": sum(verify) / sum(r["step_s"] for r in rows)}


PPO_INFO = "ppo_info.json"  # steps and stop reason of the exported policy (06 reads it as "this folder is done")
EXAMPLE = "Tom has 3 pens. He buys 2 more pens. How many pens does he have now?"  # when the pool is empty


def _training(cfg: RunConfig, steps: int) -> dict[str, Any]:
    ppo, rm = cfg.ppo, cfg.reward_model
    rows: dict[str, Any] = {
        "algorithm": "our PPO loop (rleif_kit/ppo/trainer.py)" if ppo.algorithm == "ppo" else "TRL GRPOTrainer",
        "steps": steps, "reward": f"`{ppo.reward_formula}`",
        **({"rA from": f"the PRM, {rm.prm_aggregate} over steps" if rm.answer_reward == "prm" else rm.answer_reward}
           if "rA" in parse_reward_formula(ppo.reward_formula).terms else {}),  # a term the reward uses
        "learning rate": ppo.lr, "KL coefficient (against the SFT policy)": ppo.kl_coef,
        "adaptive KL target": ppo.kl_target or "off", "clip range": ppo.clip_range,
        "rollout batch / mini-batch / epochs": f"{ppo.rollout_batch} / {ppo.mini_batch} / {ppo.ppo_epochs}",
        "GAE gamma / lambda": f"{ppo.gamma} / {ppo.lam}", "value-loss weight": ppo.vf_coef,
        "sampling temperature": ppo.temperature, "max new tokens": ppo.max_new_tokens,
        "PPO adapter r / alpha": f"{ppo.lora_r} / {ppo.lora_alpha}, merged into these weights", "seed": cfg.base.seed}
    if ppo.algorithm == "grpo":
        rows["responses per prompt"] = ppo.num_generations
    return rows


def card_example(paths: RunPaths) -> str | None:
    """The card's usage example: an instruction the trained policy answered right in its last kept rollouts (the
    world's truth), else the first instruction of the run's pool, else None (the card's own example)."""
    if paths.ppo_rollouts.exists():
        rows = list(read_jsonl(paths.ppo_rollouts))
        last = max((r["step"] for r in rows), default=None)
        right = [r for r in rows if r["step"] == last and r.get("correct") is True]
        if right:
            return right[0]["question"]
    kept = paths.kept_instructions
    first = next(iter(read_jsonl(kept)), None) if kept is not None and kept.exists() else None
    return first["text"] if first else None


def build_card(cfg: RunConfig, paths: RunPaths, result: Any, instruction: str | None) -> ModelCard:
    """The card of ``result`` (a ``PPOResult``), in the run's world and reward (its terms, its answer format);
    draws its curves into the export folder."""
    folder, last = paths.ppo_model, (result.log[-1] if result.log else {})
    world = world_for(cfg)
    template = world.train_template(cot=cfg.eval.cot_prompt)
    sft = os.path.relpath(paths.sft_model, folder)
    figures = {"ppo_curves": plot_ppo_curves(result.log)} if result.log else {}
    root = hub_id(cfg.base.model_name)
    opener = template_opener(world, cfg.eval.cot_prompt)
    log = os.path.relpath(paths.ppo_log, folder)
    answer = ("the process reward model" if cfg.reward_model.answer_reward == "prm"
              else f"the {cfg.reward_model.answer_reward} (`[reward_model] answer_reward`)")
    terms = [t for t in TERMS if t in parse_reward_formula(cfg.ppo.reward_formula).terms]
    sources = {"rI": "rI from the instruction reward model", "rA": f"rA from {answer}",
               "rV": "rV from the world's verifier", "rF": "rF from the format score"}
    rollouts = (f" `{os.path.relpath(paths.ppo_rollouts, folder)}` holds sample rollouts with their "
                f"{', '.join(terms)} and r." if paths.ppo_rollouts.exists() else "")
    means = " / ".join(f"{last.get(f'{t}_mean', float('nan')):.3f}" for t in terms)
    return ModelCard(
        title="PPO policy (RLEIF stage 05)",
        summary=("The SFT model after Reinforcement Learning from Evol-Instruct Feedback (RLEIF, the recipe of "
                 f"WizardMath and WizardCoder) in the {world.name} world: "
                 f"{'PPO' if cfg.ppo.algorithm == 'ppo' else 'GRPO'} on evolved instructions with the reward "
                 f"`{cfg.ppo.reward_formula}`, {', '.join(sources[t] for t in terms)}, and a per-token KL penalty "
                 f"against the SFT policy (`{sft}`). Standalone weights: the PPO adapter is merged in, so no base is "
                 "needed."),
        metadata={"base_model": root, "base_model_relation": "finetune" if root else None,
                  "tags": [*recipe_tags(world.recipe), "ppo" if cfg.ppo.algorithm == "ppo" else "grpo", "rlhf"],
                  "library_name": "transformers", "pipeline_tag": "text-generation"},
        usage=generation_usage(template, instruction or EXAMPLE, cfg.eval.max_new_tokens),
        prompt=(f"The SFT model's prompt, which PPO's rollouts used too: the {world.name} world's training "
                f"template{opener}, the instruction as `{{instruction}}`; the model answers as "
                f"{world.format_name}.\n\n```text\n{template}\n```"),
        training=_training(cfg, result.steps),
        results={"last step: mean reward": last.get("reward_mean"), "last step: KL": last.get("kl"),
                 f"last step: mean {' / '.join(terms)}": means if last else None,
                 "runtime (s)": round(result.runtime_s)},
        data=(f"Rollouts on the run's evolved instructions; the per-step log (`{log}`) has the reward, the mean of "
              f"each term, KL, entropy and the losses of every step.{rollouts}"),
        figures=save_figures(folder, figures),
        files={PPO_INFO: "steps trained, why training stopped early (empty when it did not), the algorithm and the "
                         "SFT policy it started from (relative to this folder)",
               **({VALUE_HEAD: "PPO's value head (a Linear on the last hidden state), for inspection; not needed to "
                               "generate"} if cfg.ppo.algorithm == "ppo" else {}),
               "figures/": "the figures above"})


# ------------------------------------------------------------------ the looks at the run

def _when(step: int) -> str:
    """Which policy sampled a step's rollouts: step s comes from the policy after s updates."""
    return f"step {step}: " + ("before training (the SFT policy)" if step == 0 else f"after {step} updates")


def _response(row: dict) -> str:
    flag = "\n(no steps found: rA = 0)" if row["flagged"] and row.get("rA", 0) is not None else ""
    return row["response"] + flag


STEP_PARTS = "steps: score → part of r"


def _step_parts(row: dict) -> str:
    """At the step level, each step's score and its part of r, one step a line (``1: 0.90 → +0.450``); the part r
    keeps at the last token beyond the steps' is ``r - sum`` of them."""
    lines = [f"{k}: {score:.2f} → {part:+.3f}"
             for k, (score, part) in enumerate(zip(row.get("step_scores") or [], row.get("step_credits") or []), 1)]
    return "\n".join(lines) or "no steps: all of r at the end"


def rollout_table(paths: RunPaths, cfg: RunConfig | None = None) -> Any:
    """The saved rollouts, first step then last: when (which policy sampled them), question, response, each term
    the reward formula uses (rI, rA, rV, rF: a term it leaves out is not shown), r, at the step level each step's
    score and part of r, and the response's KL to the reference (the sum over its tokens). With ``cfg``, a world
    whose responses are programs shows them as code."""
    if not paths.ppo_rollouts.exists():
        return missing(paths.rel(paths.ppo_rollouts), PPO, "rollouts")
    rows = list(read_jsonl(paths.ppo_rollouts))
    if not rows:
        return Note(f"{paths.rel(paths.ppo_rollouts)} is empty: PPO saved no rollout.")
    terms = [t for t in TERMS if any(r.get(t) is not None for r in rows)]
    steps = any(r.get("step_credits") is not None for r in rows)  # [ppo] reward_granularity = "step"
    table = [{"when": _when(r["step"]), "question": r["question"], "response": _response(r),
              **{t: r[t] for t in terms}, "r": r["r"],
              **({STEP_PARTS: _step_parts(r)} if steps else {}), "KL": r["kl"]} for r in rows]
    code = ("response",) if cfg is not None and run_words(cfg).code_language else ()
    return text_table(table, wrap=("question", "response", STEP_PARTS), gradient=terms, code=code)


def before_after(cfg: RunConfig, paths: RunPaths) -> Any:
    """One held-out item with the SFT policy's answer and the PPO policy's (the A/B's ``eval_sft/ppo.jsonl``)."""
    return before_after_table(lambda: heldout_problems(cfg, paths), paths.ppo_heldout("sft"), paths.ppo_heldout("ppo"),
                              ("SFT policy", "PPO policy"), run_words(cfg), PPO)


def ab_summary(cfg: RunConfig, ab: dict[str, Any]) -> str:
    """The A/B in one line, in the run's words: ``SFT 40.0%, PPO 45.0% pass@1 on 300 held-out tasks (greedy)``."""
    w = run_words(cfg)
    return (f"SFT {ab['sft_accuracy']:.1%}, PPO {ab['ppo_accuracy']:.1%} {w.score} on {ab['n']} held-out {w.tasks} "
            "(greedy)")
