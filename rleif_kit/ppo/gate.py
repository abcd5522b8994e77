"""The reward-health gate before PPO or GRPO starts: what the reward reads on the SFT policy's own samples, and the
counterfactual probes of rA and rI on the world's held-out problems. A fail stops PPO unless ``[ppo] force``
(``rewards.raise_if_failed``); the verdicts go to ``05_ppo/gate.json`` and the report."""

from __future__ import annotations

import random
from typing import Sequence

from rleif_kit.checks.probe_sets import NO_PROBE_SET, instruction_probe_pairs, probe_solutions
from rleif_kit.checks.probes import check_reward_truth, irm_probes, prm_probes
from rleif_kit.checks.verdicts import check_low_ra_share, check_reward_terms, check_score_distribution
from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import PPO
from rleif_kit.core.verdict import Verdict
from rleif_kit.ppo.policy import Policy
from rleif_kit.ppo.rewards import RewardScorer
from rleif_kit.ppo.rollout import generate_rollout

STAGE = PPO


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
    src = f"{STAGE} gate: {len(sample)} SFT responses"
    answer = cfg.reward_model.answer_reward
    reads_ra = "rA" in scorer.formula.terms
    verdicts = [check_score_distribution("IRM", scores["rI"], d, src)]
    if answer == "prm" and reads_ra:
        verdicts.append(check_score_distribution("PRM", scores["rA"], d, src))
    if reads_ra:
        verdicts.append(check_low_ra_share(scores["rA"], d, f"{src}, rA from the {answer}"))
    terms = check_reward_terms(scores, f"{src}, r = {cfg.ppo.reward_formula}")
    verdicts += [terms] if terms is not None else []
    if any(c is not None for c in scores["correct"]):
        verdicts.append(check_reward_truth(scores["correct"], scores["reward"], scores["rA"], d,
                                           f"{src}, judged by the verifier", "On the SFT policy's samples"))
    held = f"{STAGE} gate: {scorer.world.probe_source(paths)}"
    solutions = probe_solutions(cfg, paths)
    if not solutions:
        return verdicts + [Verdict("probes", "warn", {}, {}, f"Not probed: {NO_PROBE_SET}.", held)]
    how = f"with rA from the {answer}" if reads_ra else "(no rA)"
    verdicts += prm_probes(_reward_of(scorer), solutions, d, f"{held}, r = {cfg.ppo.reward_formula} {how}",
                           seed=cfg.base.seed, model="PRM" if answer == "prm" and reads_ra else "verifier",
                           edits=scorer.world.solution_edits)
    verdicts += irm_probes(scorer.instruction_texts, instruction_probe_pairs(cfg, paths), d, held, seed=cfg.base.seed)
    return verdicts


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
