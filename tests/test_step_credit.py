"""Step-level reward (``[ppo] reward_granularity = "step"``): r split over the steps by the change each makes to r as
rA's running aggregate (hand-worked), each part placed on the token where its step ends, the parts summing to r."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.rewards.reward import step_credits, step_log_fields

SOLUTION = "Step 1: 3 + 5 = 8.\nStep 2: 8 * 2 = 16.\nStep 3: 16 - 4 = 12.\nThe answer is: 12"


def _close(a, b):
    return all(abs(x - y) < 1e-9 for x, y in zip(a, b)) and len(a) == len(b)


def test_a_product_is_split_as_rI_times_the_drops_of_the_running_min():
    # rI = 0.5, steps 0.9, 0.4, 0.7 by min: A = 0.9, 0.4, 0.4 -> credits 0.45, 0.5 * (0.4 - 0.9), 0; r = 0.2
    credits, end = step_credits(parse_reward_formula("rI * rA"), 0.5, [0.9, 0.4, 0.7], "min")
    assert _close(credits, [0.45, -0.25, 0.0]) and end == 0.0
    assert abs(sum(credits) + end - 0.5 * 0.4) < 1e-12


def test_an_additive_formula_keeps_the_verifiers_share_at_the_end():
    # r = rI * (0.5 rA + 0.5 rV), rI = 1, rV = 1: g(0) = 0.5 at the end; A = 0.8, 0.6 -> 0.4, -0.1; r = 0.8
    credits, end = step_credits(parse_reward_formula("rI * (0.5 * rA + 0.5 * rV)"), 1.0, [0.8, 0.6], "min", rv=1.0)
    assert _close(credits, [0.4, -0.1]) and end == 0.5
    assert abs(sum(credits) + end - 0.8) < 1e-12


@pytest.mark.parametrize("how, expected", [("prod", [0.5, -0.25, -0.125]), ("mean", [0.5, -0.25, 0.25]),
                                           ("last", [0.5, -0.5, 1.0])])
def test_every_aggregation_telescopes_to_its_rA(how, expected):
    steps = {"prod": [0.5, 0.5, 0.5], "mean": [0.5, 0.0, 1.0], "last": [0.5, 0.0, 1.0]}[how]
    # prod: A = 0.5, 0.25, 0.125; mean: A = 0.5, 0.25, 0.5; last: A = 0.5, 0.0, 1.0
    credits, end = step_credits(parse_reward_formula("rI * rA"), 1.0, steps, how)
    assert _close(credits, expected) and end == 0.0
    assert abs(sum(credits) - {"prod": 0.125, "mean": 0.5, "last": 1.0}[how]) < 1e-12


def test_a_response_without_steps_keeps_r_with_rA_0_at_the_end():
    formula = parse_reward_formula("rI * rA + 0.2 * rF")
    assert step_credits(formula, 0.7, None, "min", rf=1.0) == ([], pytest.approx(0.2))
    assert step_credits(formula, 0.7, [], "min", rf=1.0) == ([], pytest.approx(0.2))


def test_the_log_row_names_the_steps_and_the_part_of_r_credited_early():
    scores = {"step_scores": [[0.9, 0.4, 0.7], [], [1.0, 1.0]], "step_credits": [[0.45, -0.25, 0.0], [], [1.0, 0.0]]}
    row = step_log_fields(scores)
    assert row["steps_mean"] == 2.5  # over the two responses with steps
    assert row["step_score_mean"] == pytest.approx(4.0 / 5) and row["low_step_share"] == pytest.approx(1 / 5)
    assert row["early_credit_mean"] == pytest.approx((0.2 + 1.0) / 2)  # all but the last step's credit
    assert step_log_fields({"reward": [1.0]}) == {}


def test_step_needs_rA_in_the_formula_and_names_a_fix(tmp_path):
    from rleif_kit.core.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="reward_granularity = 'step': the formula 'rI \\* rV' has no rA"):
        load_config(TINY_PARAMS, tiny_overrides(tmp_path, 'ppo.reward_granularity="step"',
                                                'ppo.reward_formula="rI * rV"'), workdir=ROOT)
    with pytest.raises(ConfigError, match="reward_granularity"):
        load_config(TINY_PARAMS, tiny_overrides(tmp_path, 'ppo.reward_granularity="token"'), workdir=ROOT)
    cfg = load_config(TINY_PARAMS, tiny_overrides(tmp_path, 'ppo.reward_granularity="step"'), workdir=ROOT)
    assert cfg.ppo.reward_granularity == "step"


# ------------------------------------------------------------------ placing the parts on the sampled tokens


@pytest.fixture(scope="module")
def tokenizer(small_model_dir):
    from rleif_kit.models.loading import load_tokenizer

    return load_tokenizer(str(small_model_dir))


def test_each_step_end_is_found_on_the_token_that_completes_it(tokenizer):
    from rleif_kit.ppo.step_credit import char_end_tokens
    from rleif_kit.worlds.steps import STEPWISE

    ids = tokenizer(" " + SOLUTION, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    ends = STEPWISE.char_ends(SOLUTION)
    assert len(ends) == 3
    text = lambda k: tokenizer.decode(ids[:k], skip_special_tokens=True).lstrip()  # noqa: E731
    positions = char_end_tokens(tokenizer, ids, ends)
    for end, pos in zip(ends, positions):
        assert len(text(pos + 1)) >= end > len(text(pos))  # this token reaches the end, the one before does not
        assert text(pos + 1).startswith(SOLUTION[:end])
    assert positions == sorted(positions) and len(set(positions)) == 3
    assert char_end_tokens(tokenizer, ids, [len(SOLUTION) + 5]) == [None]  # past the text


def _roll(tokenizer, responses, prompt_width=3):
    import torch

    rows = [tokenizer(" " + r, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for r in responses]
    T = max(map(len, rows))
    pad = tokenizer.pad_token_id
    ids = torch.tensor([[pad] * prompt_width + r + [pad] * (T - len(r)) for r in rows])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (T - len(r)) for r in rows])
    return SimpleNamespace(input_ids=ids, response_mask=mask, prompt_width=prompt_width), rows


def test_the_reward_tensor_puts_each_part_where_its_step_ends_and_sums_to_r(tokenizer):
    from rleif_kit.ppo.step_credit import char_end_tokens, credit_tensor
    from rleif_kit.worlds.steps import STEPWISE

    one = "Step 1: 2 + 2 = 4.\nThe answer is: 4"
    roll, rows = _roll(tokenizer, [SOLUTION, one, "no steps here"])
    formula = parse_reward_formula("rI * rA + 0.1 * rF")
    parts = [step_credits(formula, 0.8, [0.9, 0.3, 0.6], "min", rf=1.0),
             step_credits(formula, 0.8, [0.7], "min", rf=1.0), step_credits(formula, 0.8, None, "min", rf=0.0)]
    scores = {"step_credits": [c for c, _ in parts], "end_credit": [e for _, e in parts],
              "step_ends": [STEPWISE.char_ends(SOLUTION), STEPWISE.char_ends(one), []]}
    dense, placement = credit_tensor(tokenizer, roll, scores)
    r = [0.8 * 0.3 + 0.1, 0.8 * 0.7 + 0.1, 0.0]
    assert dense.sum(dim=1).tolist() == pytest.approx(r)  # the parts sum to r, row by row
    last = [len(x) - 1 for x in rows]
    first, second = char_end_tokens(tokenizer, rows[0], STEPWISE.char_ends(SOLUTION)[:2])
    assert dense[0, first].item() == pytest.approx(0.8 * 0.9 + 0.0)  # step 1: g(A1) - g(0) = rI * 0.9
    assert dense[0, second].item() == pytest.approx(0.8 * (0.3 - 0.9))  # step 2: the drop of the min
    assert dense[0, last[0]].item() == pytest.approx(0.1)  # step 3 (no change) and what r is without rA
    assert (dense[0] != 0).sum().item() == 3
    # a one-step response and one without steps: all of r on the last token, as at the solution level
    assert dense[1, last[1]].item() == pytest.approx(r[1]) and (dense[1] != 0).sum().item() == 1
    assert (dense[2] != 0).sum().item() == 0
    assert placement["steps_placed_share"] == 1.0  # both early step ends of row 0 found among its tokens


def test_a_step_end_that_cannot_be_placed_goes_to_the_last_token(tokenizer):
    from rleif_kit.ppo.step_credit import credit_tensor

    roll, rows = _roll(tokenizer, [SOLUTION])
    scores = {"step_credits": [[0.5, -0.2, 0.1]], "end_credit": [0.0], "step_ends": [[9999, 10000, 10001]]}
    dense, placement = credit_tensor(tokenizer, roll, scores)
    assert dense[0, len(rows[0]) - 1].item() == pytest.approx(0.4) and (dense[0] != 0).sum().item() == 1
    assert placement["steps_placed_share"] == 0.0
    scores["step_ends"] = [[5]]  # ends and credits disagree in number: nothing is guessed
    dense, _ = credit_tensor(tokenizer, roll, scores)
    assert (dense[0] != 0).sum().item() == 1


# ------------------------------------------------------------------ through PPO, on the tiny model


@pytest.mark.slow
def test_ppo_at_the_step_level_gives_gae_the_parts_and_logs_the_steps(tmp_path, small_model_dir, monkeypatch):
    """The scorer's steps reach the update (every row's rewards, KL aside, sum to its r), the log and the kept
    rollouts carry the step columns; the step verifier's labels are the step scores of rA = "verifier"."""
    from test_ppo import _pool, _run, _scorer

    from rleif_kit.ppo import ppo_math, trainer
    from rleif_kit.rewards.reward import RewardScorer

    cfg, paths = _run(tmp_path, small_model_dir, 'ppo.reward_granularity="step"', "ppo.total_steps=1")
    scorer = _scorer(cfg, paths, small_model_dir)
    assert scorer.step_level and scorer.aggregation == "min"
    # the small model writes no steps yet: every response gets the same three step scores (its ends found or not)
    monkeypatch.setattr(RewardScorer, "answer_steps", lambda self, records, responses: [[0.9, 0.2, 0.6]] * len(records))
    seen = {}
    real_gae = ppo_math.gae

    def spy(rewards, values, mask, gamma, lam):
        seen.setdefault("rewards", rewards.clone())
        seen.setdefault("mask", mask.clone())
        return real_gae(rewards, values, mask, gamma, lam)

    monkeypatch.setattr(trainer.pm, "gae", spy)
    kl_terms = {}
    real_rewards = trainer.step_credit.credit_tensor

    def spy_credit(tok, roll, scores):
        kl_terms["kl"] = (roll.logp - roll.ref_logp) * roll.response_mask
        kl_terms["r"] = list(scores["reward"])
        return real_rewards(tok, roll, scores)

    monkeypatch.setattr(trainer.step_credit, "credit_tensor", spy_credit)
    policy, result = trainer.train_ppo(cfg, paths, pool=_pool(), scorer=scorer, progress=False)
    coef = result.log[0]["kl_coef"]
    without_kl = (seen["rewards"] + coef * kl_terms["kl"]).sum(dim=1).tolist()
    assert without_kl == pytest.approx(kl_terms["r"], abs=1e-5)
    assert kl_terms["r"] == pytest.approx([s * 0.2 for s in scorer.instruction_scores(
        trainer._batch_for_step(_pool(), 0, cfg.ppo.rollout_batch, cfg.base.seed))], abs=1e-6)  # rI * min
    row = result.log[0]
    assert row["steps_mean"] == 3 and row["step_score_mean"] == pytest.approx(1.7 / 3)
    # credits rI * 0.9, rI * (0.2 - 0.9), 0: the last step changes nothing, so all of r is credited before it
    assert row["early_credit_mean"] == pytest.approx(sum(kl_terms["r"]) / len(kl_terms["r"]), abs=1e-6)
    kept = [json.loads(line) for line in paths.ppo_rollouts.read_text().splitlines()]
    assert kept and kept[0]["step_scores"] == [0.9, 0.2, 0.6] and len(kept[0]["step_credits"]) == 3


# ------------------------------------------------------------------ the gate's and 07's check of the step level


def test_the_step_credit_check_fails_parts_that_miss_r_and_warns_where_step_equals_solution():
    from rleif_kit.checks.verdicts import check_step_credit, check_step_credit_log

    ok = check_step_credit([3, 2, 1], 1.0, [0.0, 1e-9, 0.0])
    assert ok.status == "ok" and ok.numbers["multi_step_share"] == pytest.approx(2 / 3)
    assert ok.numbers["steps_mean"] == 2.0
    assert check_step_credit([3, 2], 1.0, [0.0, 0.01]).status == "fail"  # a part lost on the way
    one = check_step_credit([1, 1, 0], None, [0.0, 0.0, 0.0])
    assert one.status == "warn" and "exactly as the solution level" in one.advice
    unplaced = check_step_credit([3, 3], 0.0, [0.0, 0.0])
    assert unplaced.status == "warn" and "tokenizer" in unplaced.advice
    assert check_step_credit_log([{"step": 0, "reward_mean": 0.5}]) is None  # the solution level's log
    log = [{"step": 0, "steps_mean": 3.0, "steps_placed_share": 1.0, "early_credit_mean": 0.2},
           {"step": 1, "steps_mean": 2.0, "steps_placed_share": 0.5, "early_credit_mean": 0.1}]
    v = check_step_credit_log(log)
    assert v.status == "ok" and v.numbers["steps_mean"] == 2.5 and v.numbers["early_credit_mean"] == pytest.approx(0.15)
    assert check_step_credit_log([{"step": 0, "steps_mean": 1.0, "early_credit_mean": 0.0}]).status == "warn"


@pytest.mark.slow
def test_the_gate_checks_the_step_parts_on_its_own_sample(tmp_path, small_model_dir, monkeypatch):
    from test_ppo import _pool, _run, _scorer

    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.ppo.stage import reward_gate
    from rleif_kit.rewards.reward import RewardScorer

    cfg, paths = _run(tmp_path, small_model_dir, 'ppo.reward_granularity="step"')
    monkeypatch.setattr(RewardScorer, "answer_steps", lambda self, records, responses: [[0.9, 0.2, 0.6]] * len(records))
    verdicts = {v.check: v for v in reward_gate(cfg, paths, load_policy(cfg, paths), _scorer(cfg, paths,
                                                                                              small_model_dir), _pool())}
    step = verdicts["step_credit"]
    assert step.numbers["responses"] == cfg.ppo.gate_samples and step.numbers["steps_mean"] == 3
    assert step.numbers["max_sum_gap"] < 1e-5 and step.status in ("ok", "warn")
    # step scores blind to the solution put no blame on a corrupted first step: the blame probe ties, and fails
    blind = verdicts["step_probe_corrupt_step"]
    assert blind.status == "fail" and blind.numbers["moved_right"] == 0.0, blind

    # the step verifier's labels (rA = "verifier") mark the corrupted step wrong: its part of r drops on every pair
    from rleif_kit.checks.probe_sets import probe_solutions
    from rleif_kit.checks.probes import prm_probes
    from rleif_kit.ppo.stage import _first_step_part

    monkeypatch.undo()
    scorer = _scorer(cfg, paths, small_model_dir)
    (right,) = prm_probes(_first_step_part(scorer), probe_solutions(cfg, paths), cfg.diagnostics, model="step",
                          edits={"corrupt_step": scorer.world.solution_edits["corrupt_step"]})
    assert right.check == "step_probe_corrupt_step" and right.status == "ok" and right.numbers["moved_right"] == 1.0
