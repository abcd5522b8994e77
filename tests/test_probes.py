"""Counterfactual probes and reward-against-truth (issue 16): the edits, the statistics and the verdicts on
hand-worked cases, and the broken scorers each caught by the probe meant for it (plain functions; the trained
answer-blind PRM is in test_pipeline.py)."""

from __future__ import annotations

import pytest

from rleif_kit.checks.probes import (
    check_reward_truth,
    check_reward_truth_log,
    irm_probes,
    prm_probes,
    probe_stats,
    probe_verdict,
)
from rleif_kit.core.config import DiagnosticsConfig
from rleif_kit.core.metrics import truth_figures
from rleif_kit.rewards.reward import step_verifier_scorer, truth_log_fields
from rleif_kit.worlds import counterfactuals as cf
from rleif_kit.worlds import get_world
from rleif_kit.worlds.arith import problems as arith

is_correct = get_world("arith").is_correct
verifier_scores = step_verifier_scorer(get_world("arith"))

TWO = "Step 1: 5 + 2 = 7. Step 2: 7 * 3 = 21. The answer is: 21"
D = DiagnosticsConfig()


def test_each_edit_changes_one_thing():
    assert cf.wrong_answer(TWO) == "Step 1: 5 + 2 = 7. Step 2: 7 * 3 = 21. The answer is: 22"
    assert cf.last_step_slip(TWO) == "Step 1: 5 + 2 = 7. Step 2: 7 * 3 = 22. The answer is: 22"
    assert cf.corrupt_step(TWO) == "Step 1: 5 + 2 = 8. Step 2: 7 * 3 = 21. The answer is: 21"
    assert cf.cut_answer(TWO) == "Step 1: 5 + 2 = 7. Step 2: 7 * 3 = 21."
    assert cf.early_stop(TWO) == "Step 1: 5 + 2 = 7. The answer is: 7"
    assert cf.commute(TWO) == "Step 1: 2 + 5 = 7. Step 2: 7 * 3 = 21. The answer is: 21"
    assert cf.number_format(TWO) is None  # below 1,000 there is nothing to separate
    assert cf.number_format("Step 1: 40 * 30 = 1200. The answer is: 1200") == \
        "Step 1: 40 * 30 = 1200. The answer is: 1,200"


def test_edits_keep_the_solutions_layout_and_refuse_what_they_cannot_do():
    lines = "Step 1: 5 + 2 = 7.\nStep 2: 7 * 3 = 21.\nThe answer is: 21"
    assert cf.early_stop(lines) == "Step 1: 5 + 2 = 7.\nThe answer is: 7"
    assert cf.cut_answer(lines) == "Step 1: 5 + 2 = 7.\nStep 2: 7 * 3 = 21."
    one = "Step 1: 5 + 2 = 7. The answer is: 7"
    assert cf.corrupt_step(one) is None and cf.early_stop(one) is None  # no intermediate result, no step to drop
    assert cf.wrong_answer(one) == "Step 1: 5 + 2 = 7. The answer is: 8"
    assert cf.last_step_slip("Step 1: 5 + 2 = 7. The answer is: 9") is None  # the answer is not the last result
    assert cf.wrong_answer("Step 1: 5 + 2 = 7.") is None and cf.cut_answer("no steps. The answer is: 3") is None
    assert cf.wrong_answer("Step 1: x = 1/2. The answer is: \\frac{1}{2}") is None  # not a plain number
    assert cf.commute("Step 1: 4 + 4 = 8. The answer is: 8") is None  # nothing to swap
    assert cf.drop_number("Raj has 9 plums. He eats 2. How many are left?") == "Raj has plums. He eats 2. How many are left?"
    assert cf.drop_number("How many?") is None


def test_the_verifier_rejects_every_down_edit_and_keeps_the_same_ones():
    """The edits really break (or keep) correctness: the step verifier, a perfect PRM, agrees with each."""
    problem = arith.Problem.from_record({"topic": "fruit", "name": "Raj", "item": "plums", "start": 5,
                                         "ops": [{"kind": "add", "value": 2, "template": 0},
                                                 {"kind": "mul", "value": 3, "template": 0}],
                                         "intro": 0, "question_form": 0})
    record = {"text": problem.question(), "problem": problem.to_record("p")}
    assert problem.solution() == TWO
    for name, (edit, direction) in cf.SOLUTION_EDITS.items():
        edited = edit(TWO)
        if edited is None:
            continue
        assert verifier_scores([record], [edited]) == [0.0 if direction == "down" else 1.0], name
        assert is_correct(record, edited) is (name not in ("wrong_answer", "last_step_slip", "cut_answer",
                                                           "early_stop")), name


def test_probe_statistics_by_hand():
    s = probe_stats("wrong_answer", "down", [0.9, 0.8, 0.7, None], [0.5, 0.8, 0.9, 0.1], tolerance=0.05)
    assert s.n == 3 and s.moved_right == pytest.approx(1 / 3)  # -0.4 moved; the tie and +0.2 did not
    assert s.mean_delta == pytest.approx((-0.4 + 0 + 0.2) / 3)
    assert s.ci95[0] <= s.mean_delta <= s.ci95[1]
    same = probe_stats("commute", "same", [0.9, 0.8, 0.7], [0.88, 0.8, 0.9], tolerance=0.05)
    assert same.moved_right == pytest.approx(2 / 3)
    assert probe_stats("x", "down", [None], [0.3], 0.05) is None
    with pytest.raises(ValueError, match="direction"):
        probe_stats("x", "up", [1.0], [0.0], 0.05)


@pytest.mark.parametrize("deltas, status", [
    ([-0.3] * 9 + [0.1], "ok"),      # 90% down, interval below 0
    ([-0.3] * 7 + [0.1] * 3, "warn"),  # 70%: between the bands
    ([0.0] * 10, "fail"),            # a reward blind to the edit: every pair ties
    ([-0.3] * 5 + [0.1] * 5, "warn"),  # 50%: chance on this edit, above the fail line (0.4)
    ([-0.3] * 4 + [0.1] * 6, "fail"),  # 40%: at the fail line
    ([-0.01] * 5 + [0.3] * 5, "fail"),  # half move down a little, the mean rises: it prefers the broken one
])
def test_probe_bands(deltas, status):
    stats = probe_stats("early_stop", "down", [0.5] * len(deltas), [0.5 + d for d in deltas], 0.05)
    v = probe_verdict("PRM", stats, D)
    assert v.check == "prm_probe_early_stop" and v.status == status, v
    assert v.thresholds["ok_at"] == 0.8 and (status == "ok") == (v.advice == "")
    if status != "ok":
        assert "stop early" in v.advice


def _items():
    problems = arith.generate_problems(60, seed=3, min_steps=1, max_steps=3)
    return [{"id": p["id"], "text": p["question"], "solution": p["solution"], "problem": p} for p in problems]


def test_the_verifier_passes_every_probe():
    verdicts = prm_probes(verifier_scores, _items(), D, model="verifier")
    assert {v.check for v in verdicts} == {f"verifier_probe_{n}" for n in ("wrong_answer", "last_step_slip",
                                           "corrupt_step", "cut_answer", "early_stop", "commute")}
    assert all(v.status == "ok" for v in verdicts), [v.line() for v in verdicts if not v.ok]


def test_a_length_reward_is_caught_by_the_answer_probes():
    """A scorer that rewards length (longer solutions look more thorough) fails the probes it should fail."""
    length = lambda records, solutions: [min(1.0, len(s) / 200) for s in solutions]  # noqa: E731
    v = {x.check: x.status for x in prm_probes(length, _items(), D)}
    assert v["prm_probe_wrong_answer"] == "fail" and v["prm_probe_last_step_slip"] == "fail", v
    assert v["prm_probe_corrupt_step"] == "fail", v
    assert v["prm_probe_commute"] == "ok"  # same length: it is blind, not noisy


def test_an_answer_blind_reward_fails_and_a_capped_one_warns():
    blind = lambda records, solutions: [0.6 for _ in solutions]  # noqa: E731
    verdicts = prm_probes(blind, _items(), D)
    assert {v.check: v.status for v in verdicts if v.check != "prm_probe_commute"} == {
        "prm_probe_wrong_answer": "fail", "prm_probe_last_step_slip": "fail", "prm_probe_corrupt_step": "fail",
        "prm_probe_cut_answer": "fail", "prm_probe_early_stop": "fail"}
    capped = prm_probes(blind, _items(), D, cap="warn")
    assert all(v.status != "fail" for v in capped) and "Not this run's reward" in capped[0].advice


def test_a_template_reward_is_caught_by_the_instruction_probes():
    """An IRM that rewards one operator's wording ("in the end") whatever the problem says."""
    template = lambda texts: [0.9 if "in the end" in t else 0.3 for t in texts]  # noqa: E731
    pairs = {"unsolvable": [("Raj has 9 plums. How many in the end?", "Raj has some plums. How many in the end?"),
                            ("Ann has 3 pens. How many now?", "Ann has a few pens. How many now?")] * 5}
    v = irm_probes(template, pairs, D)
    assert [(x.check, x.status) for x in v] == [("irm_probe_unsolvable", "fail")]
    reads = lambda texts: [0.2 if "some" in t or "a few" in t else 0.8 for t in texts]  # noqa: E731
    assert irm_probes(reads, pairs, D)[0].status == "ok"


def test_truth_figures_by_hand():
    f = truth_figures([True, True, False, False, None], [0.9, 0.4, 0.5, 0.1, 0.99])
    # pairs (right, wrong): .9>.5, .9>.1, .4<.5, .4>.1 -> 3 of 4; the unjudged response is left out
    assert f == {"n": 4, "right": 2, "auc": 0.75, "right_mean": pytest.approx(0.65), "wrong_mean": pytest.approx(0.3)}
    assert truth_figures([True, True], [0.1, 0.2])["auc"] is None
    assert truth_log_fields([None, None], {"rA": [1, 0], "reward": [1, 0]}) == {}
    row = truth_log_fields([True, False], {"rA": [0.2, 0.8], "reward": [0.9, 0.1]})
    assert row["rA_truth_auc"] == 0.0 and row["r_truth_auc"] == 1.0 and row["right_share"] == 0.5


def test_reward_truth_verdicts():
    right, wrong = [True] * 10, [False] * 10
    ok = check_reward_truth(right + wrong, [0.9] * 10 + [0.1] * 10, [0.9] * 10 + [0.1] * 10, D)
    assert ok.status == "ok" and ok.numbers["r_auc"] == 1.0
    blind = check_reward_truth(right + wrong, [0.5] * 20, [0.5] * 20, D)
    assert blind.status == "fail" and "look at the PRM probes" in blind.advice  # ties: AUC 0.5
    drowned = check_reward_truth(right + wrong, [0.5] * 20, [0.9] * 10 + [0.1] * 10, D)
    assert drowned.status == "fail" and "look at the IRM" in drowned.advice  # rA ranks them, r does not
    assert check_reward_truth(right, [0.9] * 10, [0.9] * 10, D).status == "warn"  # nothing to rank


def test_reward_truth_from_the_ppo_log():
    assert check_reward_truth_log([{"step": 0, "kl": 0.1}], D) is None  # no verifier: no truth fields
    log = [{"step": i, "truth_n": 64, "r_truth_auc": 0.7 + 0.01 * i, "rA_truth_auc": 0.9, "right_share": 0.3}
           for i in range(10)] + [{"step": 10, "truth_n": 64, "r_truth_auc": None, "right_share": 1.0}]
    v = check_reward_truth_log(log, D)
    assert v.status == "ok" and v.numbers["steps"] == 10  # the all-right batch has no AUC and is left out
    assert v.numbers["r_auc"] == pytest.approx(0.745) and v.numbers["r_auc_first"] == pytest.approx(0.705)
    assert v.numbers["r_auc_last"] == pytest.approx(0.785)
    low = check_reward_truth_log([{**r, "r_truth_auc": 0.5} for r in log[:10]], D)
    assert low.status == "fail" and "look at the IRM" in low.advice
    none = check_reward_truth_log([{"step": 0, "truth_n": 64, "r_truth_auc": None}], D)
    assert none.status == "warn"


def test_is_correct_per_world():
    problem = arith.generate_problems(1, seed=0)[0]
    record = {"text": problem["question"], "problem": problem}
    assert is_correct(record, problem["solution"]) is True
    assert is_correct(record, "The answer is: -1") is False and is_correct(record, "no answer") is False
    assert is_correct({"text": "q"}, "The answer is: 7") is None  # an arith record without its problem
    math = get_world("math").is_correct
    assert math({"text": "q", "answer": "3 + 4 = 7\n#### 7"}, "Step 1: 3 + 4 = 7. The answer is: 7") is True
    assert math({"text": "q", "gold": "7"}, "The answer is: 8") is False
    assert math({"text": "q"}, "The answer is: 8") is None
    assert get_world("code").is_correct({"text": "q", "gold": "7"}, "The answer is: 7") is None  # no verifier yet


def test_commute_leaves_a_step_with_several_operators_alone():
    """Swapping inside ``10 - 3 + 4`` or ``2 + 3 * 4`` would change its meaning: only one-operator steps."""
    assert cf.commute("Step 1: 10 - 3 + 4 = 11. The answer is: 11") is None
    assert cf.commute("Step 1: 2 + 3 * 4 = 14. Step 2: 14 * 2 = 28. The answer is: 28") == \
        "Step 1: 2 + 3 * 4 = 14. Step 2: 2 * 14 = 28. The answer is: 28"


def test_the_gate_probes_the_whole_reward_so_a_formula_that_ignores_ra_fails():
    from rleif_kit.core.reward_formula import parse_reward_formula
    from rleif_kit.ppo.stage import _reward_of
    from rleif_kit.rewards.reward import RewardScorer

    class Stub:
        def __init__(self, formula):
            self.formula, self.world = parse_reward_formula(formula), get_world("arith")

        answer_scores = staticmethod(verifier_scores)
        verifiable_terms, combine = RewardScorer.verifiable_terms, RewardScorer.combine

        def instruction_texts(self, texts):
            return [0.8 for _ in texts]

    ignores = {v.check: v.status for v in prm_probes(_reward_of(Stub("rI")), _items(), D, model="verifier")}
    assert ignores["verifier_probe_wrong_answer"] == "fail" and ignores["verifier_probe_early_stop"] == "fail"
    reads = {v.check: v.status for v in prm_probes(_reward_of(Stub("rI * rA")), _items(), D, model="verifier")}
    assert set(reads.values()) == {"ok"}, reads


def _verdict(name, direction, deltas, model="PRM"):
    stats = probe_stats(name, direction, [0.5] * len(deltas), [0.5 + d for d in deltas], 0.05)
    return probe_verdict(model, stats, D)


@pytest.mark.parametrize("name, delta, way, what, todo", [
    ("rename", +0.2, "rises", "only the function's first parameter is renamed", "renamed copies of right programs"),
    ("comment", -0.1, "falls", "only a comment line is added above the return", "commented copies of right programs"),
    ("commute", +0.2, "rises", "only the operands of a step are swapped, a + b as b + a", "prm_same_edits"),
])
def test_a_meaning_preserving_probe_the_reward_reacts_to_says_so_never_ignores(name, delta, way, what, todo):
    """The code preset's PRM moved under rename and comment, and 07 said "the reward ignores this edit"; now the
    advice names the probe's edit, which way the score moved and by how much, and that probe's own remedy."""
    v = _verdict(name, "same", [delta] * 10)
    assert v.status == "fail" and v.check == f"prm_probe_{name}"
    assert f"the score {way} when {what} ({delta:+.3f} on average; it must stay within 0.05, and moved more on " \
        "100% of pairs)" in v.advice, v.advice
    assert todo in v.advice and "ignores" not in v.advice
    both = _verdict(name, "same", [0.2, -0.2] * 5)  # the mean 0, every pair moved by 0.2 one way or the other
    assert f"the score moves both ways when {what} (" in both.advice and "moved more on 100% of pairs" in both.advice


def test_a_lowering_probe_that_moved_the_wrong_way_says_it_rose_and_names_that_probe():
    v = _verdict("wrong_sign", "down", [0.2] * 9 + [-0.1])  # the mean +0.17, its interval above 0
    assert v.status == "fail"
    assert "the score rises when the program returns the negated result (+0.170 on average)" in v.advice
    assert "prefers the broken one" in v.advice and "reward_formula = 'rI * rV'" in v.advice
    assert "ignores" not in v.advice
    tie = _verdict("wrong_sign", "down", [0.0] * 10)  # blind: every pair ties
    assert "does not move when the program returns the negated result (it ties): the reward ignores" in tie.advice
    slack = _verdict("cut_code", "down", [-0.3] * 5 + [0.1] * 5)  # half drop: too few, the mean -0.1
    assert "drops on too few pairs when the program's last line is cut off (-0.100 on average)" in slack.advice


def test_number_format_has_its_own_advice_not_commutes():
    """The gate stopped PPO twice on prm_probe_number_format, whose advice was "as commute"."""
    from rleif_kit.checks.probes import PRM_ADVICE

    v = _verdict("number_format", "same", [-0.3] * 10)
    assert "the score falls when only the final answer is written with thousands separators" in v.advice
    assert PRM_ADVICE["number_format"][1] in v.advice and PRM_ADVICE["commute"][1] not in v.advice
    assert "force = true" in v.advice and "prm_same_edits = true" in v.advice


def test_every_probe_of_every_world_has_its_own_advice():
    from rleif_kit.checks.probes import IRM_ADVICE, PRM_ADVICE
    from rleif_kit.worlds import all_worlds

    edits = {edit for world in all_worlds() for edit in world.solution_edits}
    assert edits - set(PRM_ADVICE) == set() and {"rename", "comment", "number_format"} <= edits
    todos = [todo for _, todo in PRM_ADVICE.values()]
    assert len(set(todos)) == len(todos)  # no probe borrows another's advice
    assert {"unsolvable", "number_removed", "ambiguous"} <= set(IRM_ADVICE)
    irm = _verdict("unsolvable", "down", [0.0] * 10, model="IRM")
    assert irm.check == "irm_probe_unsolvable" and "): rI does not move when" in irm.advice
    other = _verdict("swap_args", "same", [0.3] * 10)  # an edit of a world the tables do not know: named
    assert "the swap args edit is made" in other.advice and "swap_args probe" in other.advice


def test_a_probe_of_a_model_the_reward_does_not_read_says_so_first_and_yields_the_box():
    """A warn of the PRM beside r = rI * rV: its advice opens with that, it is marked, and the report's what-next
    box leads with a warn of the run's own reward even when the PRM's comes first in the stage."""
    from rleif_kit.checks.probes import _capped
    from rleif_kit.core.verdict import Verdict
    from rleif_kit.pipeline.report import Scope, what_next

    warn = Verdict("prm_probe_rename", "warn", {"pairs": 10}, {"ok_at": 0.8}, "the score falls on a rename.")
    capped = _capped(warn, "warn")
    assert capped.status == "warn" and capped.advice.startswith("Not this run's reward")
    assert capped.thresholds["not_in_reward"] is True and _capped(warn, None) is warn
    own = Verdict("value_head", "warn", {"explained_variance": -0.3}, {"warn_below": -0.1}, "raise vf_coef.")
    stage = "07_reward_diagnostics"
    metrics = {stage: {"verdicts": {"prm_probe_rename": "warn", "value_head": "warn"},
                       "verdict_details": [capped.to_dict(), own.to_dict()]}}
    box = what_next([Scope("", metrics, {stage: {"status": "ok", "reason": ""}})], {}, [stage], None)
    assert box.index("value_head") < box.index("prm_probe_rename")
