"""Health checks (rleif_kit.checks.verdicts): Verdict, SFT learning, step markers, step format."""

from __future__ import annotations

import pytest

from rleif_kit.checks.verdicts import check_sft_learning, check_step_format, has_step_markers

from rleif_kit.core.verdict import Verdict
from rleif_kit.core.config import DiagnosticsConfig

CFG = DiagnosticsConfig(sft_min_gain=0.05, step_marker_min_share=0.9, step_marker_sample=0)
STEPPED = "Step 1: 5 + 3 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
PLAIN = "Tom has 5 + 3 = 8 apples and gives away 2, so 8 - 2 = 6. The answer is: 6"


# ---------------------------------------------------------------- Verdict

def test_verdict_rejects_unknown_status():
    with pytest.raises(ValueError, match="status must be one of"):
        Verdict("x", "bad")


def test_verdict_line_and_ok():
    v = Verdict("sft_learning", "ok", {"gain": 0.05, "n": 200})
    assert v.ok and v.line() == "[OK  ] sft_learning: gain=0.05, n=200"
    w = Verdict("sft_learning", "warn", {"gain": 0.0412}, advice="train longer")
    assert not w.ok and w.line() == "[WARN] sft_learning: gain=0.0412 — train longer"


# ---------------------------------------------------------------- check_sft_learning (sft_min_gain 0.05)

@pytest.mark.parametrize("before, after, status", [
    (0.30, 0.35, "ok"),    # gain 0.05 = threshold (0.35 - 0.30 is 0.0499999... in floats)
    (0.10, 0.60, "ok"),    # gain 0.50
    (0.30, 0.34, "warn"),  # gain 0.04: some learning, not enough
    (0.30, 0.31, "warn"),  # gain 0.01
    (0.30, 0.30, "fail"),  # no gain
    (0.30, 0.25, "fail"),  # worse after SFT
])
def test_sft_learning_status(before, after, status):
    v = check_sft_learning(before, after, CFG)
    assert v.status == status
    assert v.numbers["gain"] == pytest.approx(after - before)
    assert v.thresholds == {"sft_min_gain": 0.05}
    assert bool(v.advice) == (status != "ok")


def test_sft_learning_threshold_from_config():
    # the same gain 0.04 is ok once the threshold is 0.04
    assert check_sft_learning(0.30, 0.34, DiagnosticsConfig(sft_min_gain=0.04)).status == "ok"


# ---------------------------------------------------------------- has_step_markers

@pytest.mark.parametrize("solution, expected", [
    (STEPPED, True),                                                        # canonical
    ("Step 1: 5 + 3 = 8. The answer is: 8", True),                          # a one-step canonical solution
    ("step 1) add 3.\nstep 2) take 2.", True),                              # case and ")" variants
    ("1. Add 5 and 3 to get 8.\n2. Subtract 2 to get 6.\nThe answer is: 6", True),  # numbered list
    ("First: 1) 5 + 3 = 8 2) 8 - 2 = 6", True),                             # inline list
    (PLAIN, False),                                                         # one paragraph, no steps
    ("He has 12 - 4 = 8. Then 8 * 2 = 16. The answer is: 16", False),       # sentences ending in numbers
    ("The answer is: 5", False),
    ("It costs 2.5 dollars, 3.75 with tax.", False),                        # decimals are not list items
    ("", False),
])
def test_has_step_markers(solution, expected):
    assert has_step_markers(solution) is expected


# ---------------------------------------------------------------- check_step_format (min share 0.9)

def test_step_format_all_sampled_ok_at_threshold():
    v = check_step_format([STEPPED] * 9 + [PLAIN], CFG)  # sample 0 = all 10
    assert v.status == "ok" and v.numbers == {"sampled": 10, "share_with_steps": 0.9}  # 9 / 10


def test_step_format_all_sampled_fails_below_threshold():
    v = check_step_format([STEPPED] * 8 + [PLAIN] * 2, CFG)
    assert v.status == "fail" and v.numbers == {"sampled": 10, "share_with_steps": 0.8}  # 8 / 10
    assert "explicit steps" in v.advice


def test_step_format_sample_smaller_than_pool():
    cfg = DiagnosticsConfig(step_marker_sample=3)
    assert check_step_format([STEPPED] * 10, cfg).numbers == {"sampled": 3, "share_with_steps": 1.0}
    assert check_step_format([PLAIN] * 10, cfg).numbers == {"sampled": 3, "share_with_steps": 0.0}


def test_step_format_sample_is_seeded():
    cfg = DiagnosticsConfig(step_marker_sample=5)
    pool = [STEPPED] * 2 + [PLAIN] * 8
    v = check_step_format(pool, cfg, seed=1)
    assert v.numbers["sampled"] == 5
    assert v.numbers["share_with_steps"] in (0.0, 0.2, 0.4)  # 0, 1 or 2 of the 5 have steps
    assert v.status == "fail"
    assert check_step_format(pool, cfg, seed=1) == v


def test_step_format_sample_larger_than_pool_takes_all():
    v = check_step_format([STEPPED, PLAIN], DiagnosticsConfig(step_marker_sample=10))
    assert v.numbers == {"sampled": 2, "share_with_steps": 0.5}  # 1 / 2


def test_step_format_empty_pool_fails():
    v = check_step_format([], CFG)
    assert v.status == "fail" and v.numbers == {"sampled": 0, "share_with_steps": 0.0}


def test_evolve_temperature_warns_below_the_floor():
    from rleif_kit.checks.verdicts import check_evolve_temperature
    from rleif_kit.core.config import DiagnosticsConfig

    cfg = DiagnosticsConfig()  # floor 0.9
    assert check_evolve_temperature(0.9, cfg).status == "ok"  # exactly at the floor is fine
    low = check_evolve_temperature(0.7, cfg)
    assert low.status == "warn" and "raise it" in low.advice


def test_kept_floor_advises_a_lower_up_ratio():
    from rleif_kit.checks.verdicts import check_kept_floor

    assert check_kept_floor(8000, 8000, 0.7).status == "ok"
    v = check_kept_floor(5000, 8000, 0.7)
    assert v.status == "warn" and "evolve_up_ratio to 0.6" in v.advice and v.numbers == {"kept": 5000}


def test_operator_share_warns_when_two_templates_dominate():
    from rleif_kit.checks.verdicts import check_operator_share
    from rleif_kit.core.config import DiagnosticsConfig

    cfg = DiagnosticsConfig()  # max top-two share 0.5
    # top two 25 + 25 of 100 = 0.5: at the line is ok; 45 + 35 of 100 = 0.8: warn
    assert check_operator_share({"a": 25, "b": 25, "c": 25, "d": 25}, cfg).status == "ok"
    v = check_operator_share({"a": 45, "b": 35, "c": 10, "d": 10}, cfg)
    assert v.status == "warn" and abs(v.numbers["top_two_share"] - 0.8) < 1e-9


def test_score_distribution_bands():
    from rleif_kit.checks.verdicts import check_score_distribution
    from rleif_kit.core.config import DiagnosticsConfig

    cfg = DiagnosticsConfig()
    spread = [0.2, 0.4, 0.6, 0.8]  # mean 0.5, std 0.224
    assert check_score_distribution("PRM", spread, cfg).status == "ok"
    high = [0.75, 0.95, 0.85, 0.85]  # mean 0.85 (between the band and the fail line): warn
    assert check_score_distribution("IRM", high, cfg).status == "warn"
    collapsed = check_score_distribution("IRM", [0.97, 0.98, 0.99, 0.98], cfg)  # mean > 0.9, variance < 0.01
    assert collapsed.status == "fail" and "overfit" in collapsed.advice and "dedup_threshold" in collapsed.advice
    assert check_score_distribution("PRM", [0.01, 0.02, 0.0], cfg).status == "fail"  # everything rejected alike
    assert check_score_distribution("PRM", [], cfg).status == "fail"


def test_low_ra_share_bands():
    from rleif_kit.checks.verdicts import check_low_ra_share
    from rleif_kit.core.config import DiagnosticsConfig

    cfg = DiagnosticsConfig()
    def share(k):  # k of 20 answers below 0.5
        return check_low_ra_share([0.1] * k + [0.9] * (20 - k), cfg)
    assert share(6).status == "ok"        # 30%: healthy 20-40%
    assert share(3).status == "warn"      # 15%: between 10% and 20%
    assert share(1).status == "fail"      # 5%: the PRM passes everything
    assert share(12).status == "warn"     # 60%: above the band
    assert share(1).numbers["share_ra_below_0.5"] == 0.05


def test_operator_share_a_mix_the_operators_draw_is_a_note_not_a_warn():
    """The tiny code run's kept set (02_dedup/dedup_report.json): top two 71 + 29 of 145 = 0.69 > 0.5, but the
    operator mix drew them 187 + 176 of 505 = 0.72 of the evolutions: the world's operators and evolve_up_ratio
    made the share, not dedup, so it must not lead the report's what-next box as a warn."""
    from rleif_kit.checks.verdicts import check_operator_share
    from rleif_kit.core.config import DiagnosticsConfig

    cfg = DiagnosticsConfig()
    kept = {"add_requirement": 71, "new_topic": 25, "rarer_requirement": 29, "simplify": 20}
    drawn = {"add_requirement": 187, "new_topic": 70, "rarer_requirement": 176, "simplify": 72}
    v = check_operator_share(kept, cfg, drawn_per_operator=drawn)
    assert v.status == "ok" and v.advice.startswith("Informational")
    assert v.numbers["top_two_share"] == pytest.approx(100 / 145) and v.numbers["drawn_top_two_share"] == \
        pytest.approx(363 / 505)
    assert "evolve_up_ratio" in v.advice and "72%" in v.advice
    # drawn evenly (25 each: 0.5), kept 45 + 35 of 100 = 0.8: dedup concentrated it, a warn that says so
    dedup_made = check_operator_share({"a": 45, "b": 35, "c": 10, "d": 10}, cfg,
                                      drawn_per_operator={"a": 25, "b": 25, "c": 25, "d": 25})
    assert dedup_made.status == "warn" and "Dedup made it so (50% of the evolutions drawn, 80%" in dedup_made.advice
    # two operators own all of any kept set: a property of the operator set, whatever dedup did
    assert check_operator_share({"a": 45, "b": 35}, cfg).status == "ok"
    assert check_operator_share({"a": 50, "b": 30, "c": 20}, cfg).status == "warn"  # 0.8 > an even split's 0.67


def _ev_log(last_two, first=(0.0,) * 8):
    return [{"step": i, "explained_variance": ev} for i, ev in enumerate(list(first) + list(last_two))]


@pytest.mark.parametrize("last_two, mean, status", [
    ((0.3, 0.1), 0.2, "ok"),
    ((-0.1, -0.1), -0.1, "ok"),      # at value_ev_warn: ok
    ((-0.3, -0.46), -0.38, "warn"),  # the tiny code run's value head
    ((-1.0, -1.0), -1.0, "warn"),    # at value_ev_fail: still warn (fails below it)
    ((-1.2, -0.9), -1.05, "fail"),
])
def test_value_head_bands_over_the_last_fifth(last_two, mean, status):
    """10 logged steps: the last fifth is the last 2; their mean explained variance against -0.1 / -1.0."""
    from rleif_kit.checks.verdicts import check_value_head
    from rleif_kit.core.config import DiagnosticsConfig, PPOConfig

    v = check_value_head(_ev_log(last_two), DiagnosticsConfig(), PPOConfig())
    assert v.check == "value_head" and v.status == status, v.line()
    assert v.numbers["explained_variance_last"] == pytest.approx(mean)
    assert v.numbers["explained_variance_first"] == 0.0 and v.numbers["steps"] == 10
    assert v.thresholds["warn_below"] == -0.1 and v.thresholds["fail_below"] == -1.0
    assert (v.advice == "") == (status == "ok")
    if status != "ok":  # what it means and what to change, with the run's values
        assert f"{mean:+.2f} over the last 2 steps (falling from +0.00" in v.advice
        assert "worse than predicting the mean return" in v.advice
        assert "vf_coef (now 0.1" in v.advice and "ppo_epochs (now 4)" in v.advice and "lower lr" in v.advice


def test_value_head_reads_only_logged_figures_and_its_thresholds_from_config():
    from rleif_kit.checks.threshold_keys import threshold_keys
    from rleif_kit.checks.verdicts import check_value_head
    from rleif_kit.core.config import DiagnosticsConfig, PPOConfig

    ppo = PPOConfig()
    assert check_value_head([{"step": 0, "kl": 0.1}], DiagnosticsConfig(), ppo) is None  # GRPO: no value head
    # undefined figures (returns that did not vary: null in the log) are left out: 5 figures, the last one
    log = [{"step": i, "explained_variance": ev} for i, ev in enumerate([None, -0.5, -0.5, None, -0.5, -0.5, -0.3])]
    v = check_value_head(log, DiagnosticsConfig(), ppo)
    assert v.numbers["steps"] == 5 and v.numbers["explained_variance_last"] == pytest.approx(-0.3)
    assert v.numbers["lowest"] == -0.5 and v.status == "warn"
    assert check_value_head(log, DiagnosticsConfig(value_ev_warn=-0.4), ppo).status == "ok"
    assert check_value_head(log, DiagnosticsConfig(value_ev_fail=-0.2), ppo).status == "fail"
    assert threshold_keys("value_head") == ("diagnostics.value_ev_warn", "diagnostics.value_ev_fail")


def test_sft_learning_advice_speaks_the_worlds_score_and_format():
    from rleif_kit.worlds import get_world

    arith = check_sft_learning(0.30, 0.30, CFG, world=get_world("arith"))
    assert "held-out accuracy" in arith.advice and "step-by-step answers" in arith.advice
    code = check_sft_learning(0.30, 0.30, CFG, world=get_world("tiny_code"))
    assert "held-out pass@1" in code.advice and "step-by-step" not in code.advice
    assert get_world("tiny_code").format_name in code.advice
