"""Reward-health checks (rleif_kit/checks/verdicts.py) at their documented thresholds, and the artifact layer
(rleif_kit/diagnostics/stage.py) on run directories made by hand: small JSONL files, no model except in the slow tests.

Thresholds are the [diagnostics] defaults (the issue's): check 1 mean 0.4-0.7 and std > 0.1 (fail:
mean > 0.9 with variance < 0.01); check 2 share of rA < 0.5 in 0.2-0.4 (fail < 0.1); check 3 gain
>= 0.03 with the paired interval above 0; KL warn > 5, fail > 10 in the first 300 steps; duplicates
warn > 0.4, fail > 0.7; evolution failures warn > 0.02, fail > 0.1.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from conftest import ROOT, TINY_PARAMS, tiny_overrides

from rleif_kit.checks import verdicts as dg
from rleif_kit.core.config import DiagnosticsConfig, load_config
from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.worlds.prompts import math_prompt

CFG = DiagnosticsConfig()  # the defaults are the thresholds
STEPS = "Step 1: 3 + 4 = 7. Step 2: 7 - 2 = 5. The answer is: 5"


# ---------------------------------------------------------------- check 1 at the bands

@pytest.mark.parametrize("scores, status", [
    ([0.35, 0.55, 0.75], "ok"),           # mean 0.55, std 0.163
    ([0.6, 0.8, 1.0], "warn"),            # IRM mean 0.8 (0.7-0.9): warn, not fail
    ([0.95, 0.96, 0.97], "fail"),         # mean 0.96 > 0.9, variance 0.0000667 < 0.01: collapsed
    ([0.5, 0.52, 0.54], "warn"),          # mean 0.52, std 0.016 <= 0.1: too little spread
])
def test_score_distribution_bands(scores, status):
    assert dg.check_score_distribution("IRM", scores, CFG).status == status


# ---------------------------------------------------------------- check 2 from the PPO log

def ppo_log(share_first: float, steps: int = 250, share_after: float = 0.0, kl: float = 0.5) -> list[dict]:
    return [{"step": s, "low_rA_share": share_first if s < 200 else share_after, "kl": kl, "reward_mean": 0.5}
            for s in range(steps)]


@pytest.mark.parametrize("share, status", [
    (0.2, "ok"), (0.3, "ok"), (0.4, "ok"),     # the healthy band, ends included
    (0.1, "warn"), (0.19, "warn"),             # 10-20%: a weak PRM
    (0.41, "warn"), (0.9, "warn"),             # above 40%: rejects most answers
    (0.09, "fail"), (0.0, "fail"),             # under 10%: r = rI * rA is the IRM alone
])
def test_low_ra_share_from_log(share, status):
    v = dg.check_low_ra_log(ppo_log(share), CFG)
    assert v.status == status
    assert v.numbers == {"steps": 200, "share_ra_below_0.5": pytest.approx(share)}  # steps 200-249 not read


def test_low_ra_log_averages_the_first_200_steps():
    log = [{"step": s, "low_rA_share": 0.1 if s < 100 else 0.5} for s in range(300)]
    v = dg.check_low_ra_log(log, CFG)
    assert v.numbers["share_ra_below_0.5"] == pytest.approx(0.3)  # (100 * 0.1 + 100 * 0.5) / 200
    assert v.status == "ok" and v.source == "05_ppo/log.jsonl"
    assert dg.check_low_ra_log([], CFG).status == "fail"


# ---------------------------------------------------------------- KL blow-up

@pytest.mark.parametrize("kl_at_100, status", [(5.0, "ok"), (5.01, "warn"), (10.0, "warn"), (10.5, "fail"),
                                               (float("nan"), "fail")])
def test_kl_blowup_thresholds(kl_at_100, status):
    log = [{"step": s, "kl": kl_at_100 if s == 100 else 0.2} for s in range(320)]
    v = dg.check_kl_blowup(log, CFG)
    assert v.status == status and v.numbers["steps"] == 300 and v.numbers["at_step"] == 100
    assert v.thresholds == {"warn_above": 5.0, "fail_above": 10.0, "steps": 300}
    if status != "ok":
        assert "1e-6" in v.advice and "kl_coef to 0.1" in v.advice and "rollout_batch >= 64" in v.advice


def test_kl_after_step_300_is_not_read():
    log = [{"step": s, "kl": 50.0 if s == 300 else 0.2} for s in range(400)]
    assert dg.check_kl_blowup(log, CFG).status == "ok"


# ---------------------------------------------------------------- duplicates, failures, prompts

@pytest.mark.parametrize("duplicates, status", [(40, "ok"), (41, "warn"), (70, "warn"), (71, "fail")])
def test_duplicate_rate_thresholds(duplicates, status):
    v = dg.check_duplicate_rate(100, duplicates, CFG, temperature=0.7, dedup_threshold=0.95, up_ratio=0.7)
    assert v.status == status and v.numbers["duplicate_share"] == duplicates / 100
    if status != "ok":  # the advice, with the run's current values
        assert "temperature >= 0.9 (now 0.7)" in v.advice and "0.85" in v.advice and "0.6 (now 0.7)" in v.advice


@pytest.mark.parametrize("error, cause", [
    ("timeout after 3 retries", "timeout"), ("rate limited (429) after 2 retries", "rate_limit"),
    ("connection error: refused", "connection"), ("http 503: overloaded", "server_error"),
    ("http 400: too long", "client_error"), ("empty response (no message content)", "empty_response"),
    ("ValueError: odd", "other"), (None, "other"),
])
def test_failure_cause(error, cause):
    assert dg.failure_cause(error) == cause


@pytest.mark.parametrize("failed, status", [(2, "ok"), (3, "warn"), (10, "warn"), (11, "fail")])
def test_evolve_failures_thresholds(failed, status):
    v = dg.check_evolve_failures({"timeout": failed}, 100 - failed, CFG, concurrency=16)
    assert v.status == status and v.numbers["failed_share"] == failed / 100  # of 100 evolutions in all
    if status != "ok":
        assert "concurrency (now 16)" in v.advice and "resumes" in v.advice


def test_prompt_consistency():
    same = [math_prompt(q, cot=True) for q in ("Q1?", "Q2?")]
    assert dg.check_prompt_consistency(same, eval_cot=True).status == "ok"
    v = dg.check_prompt_consistency(same, eval_cot=False)  # SFT with the CoT opener, evaluation without
    assert v.status == "fail" and v.numbers["other_cot"] == 2 and "cot_prompt" in v.advice
    v = dg.check_prompt_consistency(same + ["Question: Q3?\nAnswer:"], eval_cot=True)
    assert v.status == "fail" and v.numbers["same_as_eval"] == 2 and v.numbers["other_format"] == 1


def test_verdict_table_has_every_check_and_its_advice():
    vs = [dg.check_kl_blowup(ppo_log(0.3, kl=12.0), CFG), dg.check_low_ra_log(ppo_log(0.3), CFG)]
    table = dg.format_verdict_table(vs)
    assert table.splitlines()[0].split() == ["check", "status", "numbers", "source"]
    assert "kl_blowup" in table and "FAIL" in table and "max_kl=12" in table and "low_ra_share" in table
    assert "05_ppo/log.jsonl" in table and "kl_coef" in table


# ---------------------------------------------------------------- the artifact layer (rleif_kit/diagnostics/stage.py)

def config(run: Path, *extra: str, **diagnostics):
    """The tiny preset on ``run``, its [diagnostics] pinned to the documented defaults (and ``diagnostics``)."""
    cfg = load_config(str(TINY_PARAMS), tiny_overrides(run, *extra), workdir=ROOT)
    return dataclasses.replace(cfg, diagnostics=DiagnosticsConfig(**diagnostics))


def make_run(run: Path, *, sft_right: int = 100, ppo_right: int = 160, kl: float = 0.5,
             low_ra: float = 0.3) -> None:
    """A small healthy run directory by hand (every file a check reads, except the reward models)."""
    evolve = run / "01_evolve"
    write_jsonl(evolve / "evolved.jsonl", [{"id": f"e{i}", "round": 1, "text": f"evolved {i}"} for i in range(97)])
    write_jsonl(evolve / "eliminated.jsonl", [{"id": "x0", "round": 1, "reason": "refusal"}])
    write_jsonl(evolve / "failed.jsonl", [{"id": "e0", "error": "timeout"},  # retried later and kept: not counted
                                          {"id": "f0", "error": "timeout after 3 retries"},
                                          {"id": "f1", "error": "http 503: overloaded"}])
    (run / "02_dedup").mkdir(parents=True)
    (run / "02_dedup" / "dedup_report.json").write_text(json.dumps({
        "total": 100, "kept": 67, "removed_by_layer": {"exact": 5, "semantic": 25, "decontam_ngram": 3},
        "per_operator": {"seed": {"in": 10, "kept": 10}, "deepen": {"in": 50, "kept": 30, "removed": 20},
                         "simplify": {"in": 40, "kept": 27, "removed": 13}}}))
    write_jsonl(run / "03_sft" / "train.jsonl",
                [{"id": f"s{i}", "source": "stepwise", "prompt": math_prompt(f"Q{i}?"), "completion": " " + STEPS}
                 for i in range(12)] + [{"id": "o0", "source": "open_domain", "prompt": math_prompt("Hi"),
                                         "completion": " Hello."}])
    write_jsonl(run / "05_ppo" / "log.jsonl", ppo_log(low_ra, kl=kl))
    for model, right in (("sft", sft_right), ("ppo", ppo_right)):
        write_jsonl(run / "06_eval" / model / "arith.jsonl",
                    [{"id": f"h{i}", "correct": i < right} for i in range(200)])
        (run / "06_eval" / model / "arith.meta.json").write_text(json.dumps({"benchmark": "arith", "cot": True}))


def health_of(run: Path, *extra: str):
    from rleif_kit.diagnostics.stage import check_artifacts

    return check_artifacts(config(run, "dedup.min_kept=50", *extra), RunPaths(run, run.parent / "reports"), score=False)


def test_healthy_run_every_file_check_ok(tmp_path):
    run = tmp_path / "run"
    make_run(run)
    health = health_of(run)
    assert health.statuses() == {
        "evolve_failures": "ok",     # 2 still failed of 2 + 98 decided = 0.02, at the warn line
        "duplicate_rate": "ok",      # (5 + 25) / 100 = 0.30 (decontamination is not duplication)
        "kept_floor": "ok",          # 67 >= 50
        "step_format": "ok",         # 10 sampled stepwise answers, all with steps
        "prompt_consistency": "ok",  # 13 prompts, all math_prompt(q, cot=True) as the eval meta says
        "low_ra_share": "ok",        # 0.3 over steps 0-199
        "kl_blowup": "ok",           # 0.5 <= 5
        "sft_vs_ppo_arith": "ok",    # 0.50 -> 0.80 on the same 200 items
    }
    assert health.fails == 0 and health.number("evolve_failures", "by_cause") == {"timeout": 1, "server_error": 1}
    assert health.number("duplicate_rate", "duplicate_share") == pytest.approx(0.30)
    assert health.accuracy == {"SFT": 0.5, "PPO": 0.8}
    assert health.ab()["sft_vs_ppo_arith"]["gain"] == pytest.approx(0.30) and health.ab()["sft_vs_ppo_arith"]["n"] == 200
    assert set(health.per_operator) == {"deepen", "simplify"} and len(health.ppo_log) == 250
    by_check = {v.check: v for v in health.verdicts}
    assert by_check["prompt_consistency"].numbers["sampled"] == 13
    assert by_check["prompt_consistency"].source == "03_sft/train.jsonl vs 06_eval/ppo/arith.meta.json"
    assert by_check["sft_vs_ppo_arith"].source == "06_eval/sft/arith.jsonl vs 06_eval/ppo/arith.jsonl"
    assert by_check["low_ra_share"].source == "05_ppo/log.jsonl"
    assert health.skipped == ["irm_distribution, prm_distribution, probes: scoring switched off",
                              "reward_truth: no responses a verifier judges (no PPO log with truth fields, no held-out "
                              "PRM samples of a world with a verifier)"]


def test_broken_run_fails_where_it_should(tmp_path):
    run = tmp_path / "run"
    make_run(run, sft_right=120, ppo_right=100, kl=12.0, low_ra=0.02)
    health = health_of(run)
    s = health.statuses()
    assert s["low_ra_share"] == "fail"       # 2% < 10%: a PRM that passes everything
    assert s["kl_blowup"] == "fail"          # 12 > 10 from step 0
    assert s["sft_vs_ppo_arith"] == "fail"   # 0.60 -> 0.50: the whole interval is below +3 points
    assert health.fails == 3


def test_prompt_mismatch_with_the_evaluation_meta(tmp_path):
    run = tmp_path / "run"
    make_run(run)
    for model in ("sft", "ppo"):  # evaluation ran without the CoT opener SFT trained with
        (run / "06_eval" / model / "arith.meta.json").write_text(json.dumps({"benchmark": "arith", "cot": False}))
    v = {v.check: v for v in health_of(run).verdicts}["prompt_consistency"]
    assert v.status == "fail" and v.numbers["other_cot"] == 13 and v.numbers["eval_cot"] is False


def test_ab_falls_back_to_the_ppo_stage_eval_files(tmp_path):
    run = tmp_path / "run"
    make_run(run)
    import shutil

    shutil.rmtree(run / "06_eval")
    write_jsonl(run / "05_ppo" / "eval_sft.jsonl", [{"id": f"h{i}", "correct": i < 100} for i in range(200)])
    write_jsonl(run / "05_ppo" / "eval_ppo.jsonl", [{"id": f"h{i}", "correct": i < 104} for i in range(200)])
    v = {v.check: v for v in health_of(run).verdicts}["sft_vs_ppo"]
    # +2 points: below 3, but the interval reaches above it (4 flips of 200): too wide to tell
    assert v.status == "warn" and v.numbers["gain"] == pytest.approx(0.02)
    assert v.source == "05_ppo/eval_sft.jsonl vs 05_ppo/eval_ppo.jsonl"


def test_empty_run_skips_every_check_with_a_note(tmp_path):
    health = health_of(tmp_path / "run")
    assert health.verdicts == []
    assert [n.split(":")[0] for n in health.skipped] == [
        "evolve_failures", "duplicate_rate, kept_floor", "step_format, prompt_consistency",
        "irm_distribution, prm_distribution, probes", "kl_blowup", "low_ra_share", "reward_truth", "sft_vs_ppo"]
    assert not (tmp_path / "run" / "05_ppo").exists()  # reading makes no stage folders


def test_verdicts_html_and_file(tmp_path):
    from rleif_kit.core.plots import STATUS_COLORS
    from rleif_kit.diagnostics.stage import verdicts_html, write_verdicts

    run = tmp_path / "run"
    make_run(run, kl=12.0)
    health = health_of(run)
    html = verdicts_html(health.verdicts)
    assert html.count("<tr>") == len(health.verdicts) + 1
    assert STATUS_COLORS["fail"] in html and STATUS_COLORS["ok"] in html and "kl_blowup" in html
    path = write_verdicts(RunPaths(run, tmp_path / "reports"), health)
    data = json.loads(path.read_text())
    assert path == run / "07_reward_diagnostics" / "verdicts.json"
    assert {v["check"]: v["status"] for v in data["verdicts"]} == health.statuses()


def test_the_stage_writes_its_verdicts_and_the_reading_layer_writes_nothing(tmp_path):
    """run_diagnostics (the notebook, python -m) writes verdicts.json; check_artifacts (rleif doctor) reads only."""
    from rleif_kit.diagnostics.stage import check_artifacts, run_diagnostics

    run = tmp_path / "run"
    make_run(run, kl=12.0)
    cfg, paths = config(run, "dedup.min_kept=50"), RunPaths(run, tmp_path / "reports")
    check_artifacts(cfg, paths, score=False)
    assert not (run / "07_reward_diagnostics").exists()
    health = run_diagnostics(cfg, paths, score=False)
    data = json.loads(paths.verdicts.read_text())
    assert {v["check"]: v["status"] for v in data["verdicts"]} == health.statuses()
    assert data["skipped"] == health.skipped
    assert health.statuses()["kl_blowup"] == "fail"  # the file holds a run's fails too


def test_reward_health_curves_plot():
    from rleif_kit.core.plots import plot_reward_health_curves

    fig = plot_reward_health_curves(ppo_log(0.3, steps=20), (0.2, 0.4), 200, 5.0, 10.0)
    assert [ax.get_title() for ax in fig.axes] == ["reward r", "share of rA < 0.5", "KL per sequence",
                                                   "reward vs truth: AUC, right over wrong"]
    assert "no verifier" in fig.axes[3].texts[0].get_text()  # a log without truth fields says so
    log = [{**row, "r_truth_auc": 0.8, "rA_truth_auc": 0.9} for row in ppo_log(0.3, steps=20)]
    fig = plot_reward_health_curves(log, (0.2, 0.4), 200, 5.0, 10.0, truth_band=(0.55, 0.7))
    assert [line.get_label() for line in fig.axes[3].get_lines()] == ["r", "rA", "chance", "ok from 0.7",
                                                                     "fail below 0.55"]


def test_probe_plot_one_bar_per_probe_coloured_by_status():
    from rleif_kit.checks.probes import probe_stats, probe_verdict
    from rleif_kit.core.config import DiagnosticsConfig
    from rleif_kit.core.plots import plot_probes

    d = DiagnosticsConfig()
    good = probe_verdict("PRM", probe_stats("early_stop", "down", [0.5] * 10, [0.1] * 10, 0.05), d)
    blind = probe_verdict("PRM", probe_stats("wrong_answer", "down", [0.5] * 10, [0.5] * 10, 0.05), d)
    fig = plot_probes([good, blind], d.probe_ok, d.probe_fail)
    bars = fig.axes[0].patches
    assert [round(b.get_width(), 3) for b in bars] == [1.0, 0.0]
    assert [label.get_text() for label in fig.axes[0].get_yticklabels()] == ["prm_probe_early_stop",
                                                                            "prm_probe_wrong_answer"]


# ---------------------------------------------------------------- check 1 with real (tiny) reward models

def build_reward_models(model_dir: Path, run: Path) -> Path:
    """``run/04_reward_models`` as the stage saves it: IRM and PRM on ``model_dir`` with fresh heads
    (untrained: the checks' plumbing is under test, not the models), and 30 sampled solutions."""
    from rleif_kit.rewards.rm_training import load_rm_for_training, save_rm
    from rleif_kit.worlds.arith import problems as arith

    out = run / "04_reward_models"
    cfg = config(run)
    for name, head in (("irm", "sequence"), ("prm", "token")):
        model, tokenizer = load_rm_for_training(str(model_dir), head, cfg, bf16=False)
        save_rm(model, tokenizer, out / name, {"head": head, "finetune": "full", "base_model": str(model_dir)},
                f"# {name}\n")
    write_jsonl(out / "prm_samples.jsonl", [{"id": p["id"], "question": p["question"], "solution": p["solution"]}
                                            for p in arith.generate_problems(30, seed=3)])
    return out


@pytest.fixture(scope="module")
def reward_models(small_model_dir, tmp_path_factory):
    return build_reward_models(small_model_dir, tmp_path_factory.mktemp("rm") / "run")


@pytest.mark.slow
def test_score_distributions_from_saved_reward_models(tmp_path, reward_models):
    import shutil

    from rleif_kit.diagnostics.stage import run_diagnostics

    run = tmp_path / "run"
    make_run(run)
    (run / "05_ppo" / "log.jsonl").unlink()  # check 2 then comes from the PRM's rA on the sampled solutions
    shutil.copytree(reward_models, run / "04_reward_models")
    write_jsonl(run / "02_dedup" / "instructions.jsonl",
                [{"id": f"e{i}", "round": 1, "text": f"Tom has {i} apples. How many?"} for i in range(20)])
    cfg = config(run, "dedup.min_kept=50", score_sample=8)
    health = run_diagnostics(cfg, RunPaths(run, tmp_path / "reports"))
    by_check = {v.check: v for v in health.verdicts}
    irm, prm, low_ra = by_check["irm_distribution"], by_check["prm_distribution"], by_check["low_ra_share"]
    assert irm.numbers["n"] == 8 and 0 <= irm.numbers["mean"] <= 1  # 8 of the 20 evolved instructions
    assert irm.source == "04_reward_models/irm on 8 instructions of 02_dedup/instructions.jsonl"
    assert prm.numbers["n"] == len(health.scores["PRM rA (sampled solutions)"]) > 0
    assert low_ra.source.startswith("04_reward_models/prm rA on") and low_ra.numbers["n"] == prm.numbers["n"]
    assert all(0 <= s <= 1 and not math.isnan(s) for scores in health.scores.values() for s in scores)
