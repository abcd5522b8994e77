"""The whole tiny pipeline, 00_setup to 07_reward_diagnostics, run once per session headless with papermill;
each stage's recorded metrics are then asserted by its own test and against the regression baselines in
tests/baselines/tiny-cpu.json. Also here, because they need the trained tiny SFT model and reward models
(reused from the shared run, never retrained): the PPO machinery with a perfect PRM, the KL guard on a
deliberately unstable run, and a deliberately broken PRM that the reward-health checks must fail.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, TINY_PARAMS, baseline_misses, tiny_overrides

from rleif_kit.core.records import read_records
from rleif_kit.pipeline.runner import run_pipeline

pytestmark = pytest.mark.slow

STAGES = "00_setup,01_evolve,02_dedup,03_sft,04_reward_models,05_ppo,06_eval,07_reward_diagnostics"
BASELINES = ROOT / "tests" / "baselines" / "tiny-cpu.json"


def run_tiny(root: Path) -> list:
    """``rleif run`` of the tiny preset from the project root, artifacts in ``root/run``, reports in ``root/reports``."""
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        return run_pipeline(str(TINY_PARAMS), STAGES, tiny_overrides(root / "run"), report_dir=str(root / "reports"))
    finally:
        os.chdir(cwd)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pipeline")
    runs = run_tiny(root)
    assert [r.stage for r in runs] == STAGES.split(",")
    return root


def metrics(root: Path, stage: str) -> dict:
    return read_records(root / "reports" / "metrics.json")[stage]


def test_metrics_match_the_regression_baselines(tiny_run):
    off = baseline_misses(tiny_run / "reports" / "metrics.json", BASELINES)
    assert off == [], "\n".join(off)


def test_evolve_stage(tiny_run):
    ev = metrics(tiny_run, "01_evolve")
    # 400 seeds x 3 rounds, every lineage decided each round
    assert ev["kept"] + ev["eliminated"] == 1200 and ev["failed"] == 0 and ev["duplicate_ids"] == 0
    assert 0.05 < ev["eliminated"] / 1200 < 0.35  # defect_rate 0.2, part of it caught here
    assert {"leaked_template", "unparseable"} <= set(ev["reasons"])
    assert ev["cost_usd"] == 0.0 and (tiny_run / "reports" / "figures" / "01_evolve_operators.png").exists()


def test_dedup_stage(tiny_run):
    dd, run_dir = metrics(tiny_run, "02_dedup"), tiny_run / "run"
    assert dd["total"] == 400 + metrics(tiny_run, "01_evolve")["kept"]
    assert 0.10 <= dd["removed_share"] <= 0.40, dd  # the tiny preset's threshold is chosen for this band
    assert dd["removed_by_layer"].get("semantic", 0) > 0
    removed = [json.loads(line) for line in (run_dir / "02_dedup" / "removed.jsonl").read_text().splitlines()]
    assert all(r["duplicate_of"] and r["layer"] for r in removed)
    sources = {json.loads(line)["source"] for line in (run_dir / "02_dedup" / "sft.jsonl").read_text().splitlines()}
    assert sources == {"stepwise", "evolved", "open_domain"}
    assert (tiny_run / "reports" / "figures" / "02_dedup_similarity.png").exists()
    assert dd["sft_evolved"] > 0 and dd["sft_share_truncated"] == 0.0
    assert dd["verdicts"] == {"evolve_temperature": "ok", "kept_floor": "ok", "operator_share": "ok", "step_format": "ok"}


def test_sft_stage_learns_arithmetic(tiny_run):
    """Fixed steps, threads and kernels: held-out greedy accuracy >= 40% on 200 problems (54.0% pinned, 53.5% with an
    AVX-512 machine's own kernels; with the tiny teacher's early stops on 3-step problems). Other seeds land from
    21.5% to 46.5% (docs/results.md): this bound is the preset's, not the recipe's."""
    sft = metrics(tiny_run, "03_sft")
    assert sft["accuracy_before"] <= 0.05  # the untrained model is near 0%
    assert sft["accuracy_after"] >= 0.40, sft
    assert sft["final_loss"] < 0.5 * sft["first_loss"]
    # 30,000 arith + 40 open-domain + the evolved instructions that survived dedup
    assert sft["steps"] == 500 and sft["examples"] > 30_040
    assert sft["verdicts"] == {"step_format": "ok", "sft_learning": "ok"}
    assert (tiny_run / "reports" / "figures" / "03_sft_loss.png").exists()
    assert (tiny_run / "run" / "03_sft" / "model" / "model.safetensors").exists()
    manifest = json.loads((tiny_run / "run" / "manifest.json").read_text())
    assert set(STAGES.split(",")) <= set(manifest["stages"]) and manifest["versions"]["trl"]


def test_reward_models_stage_learns(tiny_run):
    rm, out = metrics(tiny_run, "04_reward_models"), tiny_run / "run" / "04_reward_models"
    assert rm["irm_heldout_accuracy"] >= 0.70 and rm["irm_heldout_pairs"] >= 100, rm
    assert rm["prm_step_auc"] >= 0.70 and rm["prm_heldout_steps"] >= 300, rm
    assert 0.2 < rm["prm_correct_share"] < 0.8  # the SFT model's samples hold both right and wrong steps
    assert rm["prm_flagged"] <= 0.05 * rm["prm_samples"]
    for name in ("irm", "prm"):
        assert (out / name / "README.md").exists() and (out / name / "rm_info.json").exists()
    assert set(rm["verdicts"]) == {"irm_distribution", "prm_distribution", "low_ra_share"}
    for fig in ("04_irm_loss", "04_prm_loss", "04_score_histograms", "04_prm_steps"):
        assert (tiny_run / "reports" / "figures" / f"{fig}.png").exists()


# What may warn on a healthy run (tests/baselines/tiny-cpu.json, "_measured"): the tiny IRM does not notice a question
# about someone it never mentions (ambiguous: about half the pairs move, in every run), and on some machines and seeds
# it misses a removed number more often than the probe allows (number_removed); the generative PRM's score moves when
# a step's operands are swapped (commute: the SFT model computes "5 + 3" less surely than "3 + 5", the order its
# teacher writes). A warn is allowed, never required; the PRM's answer probes and the reward against truth must be ok.
TINY_MAY_WARN = {"irm_probe_ambiguous", "irm_probe_number_removed", "prm_probe_commute"}
PRM_ANSWER_PROBES = {f"prm_probe_{e}" for e in ("wrong_answer", "last_step_slip", "corrupt_step", "cut_answer",
                                                 "early_stop")}


def test_ppo_stage_on_the_learned_reward_records_and_judges_itself(tiny_run):
    """Issue 29: the tiny preset's reward is RLEIF's, rI from the learned IRM x rA from the learned PRM (the
    generative one, rewards/prm_likelihood.py). Its answer probes pass the gate, its reward ranks PPO's own samples
    by truth (AUC >= 0.85 in the first and the last fifth: no decay), and PPO unlearns the tiny teacher's early stops
    for a gain of at least 3 points with the interval above 0 (docs/results.md: the seeds and machines measured)."""
    ppo = metrics(tiny_run, "05_ppo")
    assert ppo["answer_reward"] == "prm" and ppo["steps"] == 40 and ppo["eval_n"] == 1000
    assert not ppo["stopped"] and ppo["reward_last_fifth"] > ppo["reward_first_fifth"], ppo
    assert ppo["ppo_accuracy"] - ppo["sft_accuracy"] >= 0.03, ppo
    gate = {k: s for k, s in ppo["verdicts"].items() if k != "sft_vs_ppo"}
    assert {"irm_distribution", "prm_distribution", "low_ra_share", "reward_truth", "irm_probe_unsolvable"} \
        | PRM_ANSWER_PROBES <= set(gate), gate
    assert {k: gate[k] for k in PRM_ANSWER_PROBES} == dict.fromkeys(PRM_ANSWER_PROBES, "ok"), gate
    not_ok = {k: s for k, s in gate.items() if s != "ok"}
    assert set(not_ok.values()) <= {"warn"} and set(not_ok) <= TINY_MAY_WARN, gate
    assert ppo["r_truth_auc_first"] >= 0.85 and ppo["r_truth_auc_last"] >= 0.85, ppo
    assert ppo["verdicts"]["sft_vs_ppo"] == "ok", ppo["verdicts"]
    log = (tiny_run / "run" / "05_ppo" / "log.jsonl").read_text().splitlines()
    assert len(log) == ppo["steps"] and (tiny_run / "reports" / "figures" / "05_ppo_curves.png").exists()
    assert (tiny_run / "run" / "05_ppo" / "model" / "model.safetensors").exists()


def _copy_inputs(tiny_run: Path, dest: Path) -> None:
    """A fresh run directory holding only what 05_ppo reads, so the shared run is not touched."""
    src = tiny_run / "run"
    for part in ("tiny-llama", "arith", "02_dedup/instructions.jsonl", "03_sft/model", "04_reward_models/irm",
                 "04_reward_models/prm", "04_reward_models/irm_fanout.jsonl", "04_reward_models/prm_samples.jsonl"):
        target = dest / part
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (src / part).is_dir() else shutil.copy)(src / part, target)


def test_kl_guard_stops_a_deliberately_unstable_run(tiny_run, tmp_path):
    from rleif_kit.core.run_setup import setup
    from rleif_kit.ppo.trainer import train_ppo

    _copy_inputs(tiny_run, tmp_path / "run")
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", "ppo.lr=1e-2", "ppo.total_steps=15",
                                                         "ppo.save_every=2", "ppo.force=true"),
                       stage="05_ppo", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    policy, result = train_ppo(cfg, paths, progress=False)
    assert result.stopped and "lower [ppo] lr" in result.stopped, result.log[-1]
    assert result.steps < 15
    checkpoints = sorted(p.name for p in (paths.stage("05_ppo") / "checkpoints").glob("step-*"))
    assert all(int(name.split("-")[1]) <= result.steps for name in checkpoints)  # nothing saved past the guard


def test_eval_stage_agrees_with_ppo_and_judges_the_ab(tiny_run):
    ev, ppo = metrics(tiny_run, "06_eval"), metrics(tiny_run, "05_ppo")
    assert set(ev["models"]) == {"sft", "ppo"} and ev["pending"] == 0
    # the same 1,000 held-out problems, greedy, the same prompt: 06 reproduces what 05 measured
    assert abs(ev["accuracy"]["sft"]["arith"] - ppo["sft_accuracy"]) <= 0.01, (ev["accuracy"], ppo)
    assert abs(ev["accuracy"]["ppo"]["arith"] - ppo["ppo_accuracy"]) <= 0.01, (ev["accuracy"], ppo)
    ab, verdict = ev["ab"]["arith"], ev["verdicts"]["sft_vs_ppo_arith"]
    if ab["gain"] < 0:
        assert verdict != "ok"  # a drop is never ok
    if ab["gain"] >= 0.03 and ab["ci95"][0] > 0:
        assert verdict == "ok", ab  # a clear gain is (+3.9 points measured, interval +1.8 to +6.1)


def test_diagnostics_stage_checks_everything_and_agrees_with_the_ab(tiny_run):
    """Every check ran; none fails on the healthy run. What warns is measured and expected (TINY_MAY_WARN): the PRM
    that is PPO's reward reads the answer (its answer probes ok), the tiny IRM misses ambiguity."""
    dg = metrics(tiny_run, "07_reward_diagnostics")
    v = dg["verdicts"]
    assert {"irm_distribution", "prm_distribution", "low_ra_share", "kl_blowup", "duplicate_rate",
            "evolve_failures", "step_format", "prompt_consistency", "reward_truth", "irm_probe_unsolvable"} \
        | PRM_ANSWER_PROBES <= set(v), v
    assert dg["fails"] == 0 and "fail" not in v.values(), v
    assert {k for k, s in v.items() if s == "warn"} <= TINY_MAY_WARN, v
    assert v["reward_truth"] == "ok" and dg["reward_truth"]["r_auc"] >= 0.85, dg["reward_truth"]
    assert v["kl_blowup"] == "ok" and v["step_format"] == "ok" and v["prompt_consistency"] == "ok"
    assert (tiny_run / "reports" / "figures" / "07_probes.png").exists()
    ab = {k: s for k, s in v.items() if k.startswith("sft_vs_ppo")}
    assert ab and (metrics(tiny_run, "05_ppo")["ppo_accuracy"] >= metrics(tiny_run, "05_ppo")["sft_accuracy"]
                   or "ok" not in ab.values())
    assert (tiny_run / "reports" / "index.html").exists()


def test_a_prm_that_passes_every_step_is_caught(tiny_run, tmp_path, monkeypatch):
    """Break the trained PRM so every step scores 1.0 (its calibration set to sigmoid(0 * x + 20)); the PPO gate
    refuses it and check 2 fails. Only the stages the change affects rerun (05 and 07), from the shared run's
    artifacts."""
    from rleif_kit.pipeline.runner import StageFailed

    monkeypatch.chdir(ROOT)
    _copy_inputs(tiny_run, tmp_path / "run")
    info_path = tmp_path / "run" / "04_reward_models" / "prm" / "rm_info.json"
    info = json.loads(info_path.read_text())
    assert info["head"] == "likelihood"
    info_path.write_text(json.dumps({**info, "calibration": [0.0, 20.0]}))  # P(step right) = 1 - 2e-9, always
    reports = tmp_path / "reports"
    with pytest.raises(StageFailed, match="reward-health gate"):
        run_pipeline(str(TINY_PARAMS), "05_ppo", tiny_overrides(tmp_path / "run"), report_dir=str(reports))
    run_pipeline(str(TINY_PARAMS), "07_reward_diagnostics", tiny_overrides(tmp_path / "run"), report_dir=str(reports))
    verdicts = read_records(reports / "metrics.json")["07_reward_diagnostics"]["verdicts"]
    assert verdicts["low_ra_share"] == "fail" and verdicts["prm_distribution"] == "fail", verdicts


# Measured on 300 held-out 3-step problems (min aggregation; tools/measure_spread.py, docs/testing.md) with the
# preset's generative PRM (2026-12-04, 2-core AMD EPYC, pinned): the answer moves rA by more than 1e-6 on 100% of
# pairs with the preset's seed (96.3% and 98.7% with seeds 7 and 1234: a sure score moves less than that), "999"
# scores below the right answer on 100% (99.7%, 99.0%), the early stop below the complete solution on 99.0% (98.7%,
# 96.3%). The token PRM before it: 100%, 83.7% and 42.7%; before its last label moved after the answer, the same rA
# for the right answer, "999" and none on 300 of 300. The bounds sit below everything seen.
ANSWER_MOVES, EARLY_AND_WRONG_BELOW = 0.9, {"wrong": 0.9, "early": 0.9}


def test_the_trained_prm_reads_the_answer(tiny_run):
    """Issues 16 and 29: rA moves when only the answer changes, a wrong answer scores below the right one, and a
    solution that stops one step early (the tiny teacher's error) below the complete one — each on 90% of pairs
    or more (the token PRM of issue 16 reached 42.7% on the early stop; the generative PRM 96-99%)."""
    from statistics import mean

    from rleif_kit.checks.probe_sets import answer_edits
    from rleif_kit.core.config import load_config
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.rewards.reward import answer_scores, load_rm

    cfg = load_config(str(TINY_PARAMS), tiny_overrides(tiny_run / "run"))
    paths = RunPaths(tiny_run / "run")
    model, tok = load_rm(paths.prm_model)
    edits = answer_edits(cfg, paths)
    how = cfg.reward_model.prm_aggregate
    r_complete, r_early, r_wrong = (answer_scores(model, tok, edits[k], how) for k in ("complete", "early", "wrong"))
    assert len(edits["complete"]) == 300
    assert mean(abs(w - c) >= 1e-6 for c, w in zip(r_complete, r_wrong)) >= ANSWER_MOVES  # the answer moves rA
    assert mean(w < c for c, w in zip(r_complete, r_wrong)) >= EARLY_AND_WRONG_BELOW["wrong"]
    assert mean(e < c for c, e in zip(r_complete, r_early)) >= EARLY_AND_WRONG_BELOW["early"]


def test_the_broken_reward_gallery_is_caught(tiny_run, tmp_path, monkeypatch):
    """Issue 16's gallery, on the shared run's data: each broken reward fails the check meant for it.
    - an answer-blind PRM, really trained: the labelling of before the fix (last label read before the answer,
      switched back by the test-only LABEL_AFTER_ANSWER) gives a right and a wrong answer the same rA;
    - a scorer that rewards length: a wrong answer or a corrupted step is no shorter, so it is not lower;
    - an IRM that rewards one operator's template wording: an unsolvable question keeps the wording."""
    from rleif_kit.checks.probe_sets import instruction_probe_pairs, probe_solutions
    from rleif_kit.checks.probes import irm_probes, prm_probes
    from rleif_kit.core.jsonl import read_jsonl
    from rleif_kit.core.run_setup import setup
    from rleif_kit.rewards.prm import train_prm, verifier_examples
    from rleif_kit.rewards.reward import prm_scorer
    from rleif_kit.worlds import steps as step_labels
    from rleif_kit.worlds import world_for

    monkeypatch.chdir(ROOT)
    _copy_inputs(tiny_run, tmp_path / "run")
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'reward_model.prm_head="token"'),
                       stage="04_reward_models", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    d, solutions = cfg.diagnostics, probe_solutions(cfg, paths)

    monkeypatch.setattr(step_labels, "LABEL_AFTER_ANSWER", False)
    examples, _ = verifier_examples(list(read_jsonl(paths.prm_samples)), world_for(cfg))
    model, tok, result = train_prm(cfg, paths, examples)
    assert result.step_auc >= 0.7  # by its own held-out step AUC it looks like a fine PRM
    blind = {v.check: v for v in prm_probes(prm_scorer(model, tok, "min", max_len=cfg.reward_model.rm_max_len),
                                            solutions, d)}
    wrong = blind["prm_probe_wrong_answer"]
    assert wrong.status == "fail" and wrong.numbers["moved_right"] == 0.0, wrong  # every pair tied
    assert abs(wrong.numbers["mean_change"]) < 1e-6
    monkeypatch.setattr(step_labels, "LABEL_AFTER_ANSWER", True)

    length = {v.check: v.status for v in prm_probes(lambda records, sols: [min(1.0, len(s) / 200) for s in sols],
                                                    solutions, d)}
    assert length["prm_probe_wrong_answer"] == "fail" and length["prm_probe_corrupt_step"] == "fail", length

    pairs = instruction_probe_pairs(cfg, paths)
    template = {v.check: v.status for v in irm_probes(lambda texts: [0.9 if "at the end" in t else 0.3 for t in texts],
                                                      pairs, d)}
    assert template["irm_probe_unsolvable"] == "fail" and template["irm_probe_number_removed"] == "fail", template


def test_rm_check_on_the_tiny_runs_irm_and_prm_reproduces_the_gates_verdicts(tiny_run, tmp_path, monkeypatch, capsys):
    """``rleif rm-check`` without data reads the run's gate data (diagnostics/rm_check.py): the IRM's distribution on
    the instructions the gate sampled and its probes are the gate's own (same pairs, same scorer: the same numbers);
    the PRM's probes score rA where the gate scores r = rI * rA (rI > 0 fixed per question: a pair moves the same way),
    so each probe that must lower the score has the gate's status; one that must not move it keeps at most the gate's
    share of pairs within the tolerance (rA's changes are rI's times larger). Exit 1 exactly when one of them fails."""
    from rleif_kit.pipeline.cli import main

    monkeypatch.chdir(ROOT)
    _copy_inputs(tiny_run, tmp_path / "run")
    gate = {v["check"]: v for v in json.loads((tiny_run / "run" / "05_ppo" / "gate.json").read_text())}
    found = {}
    for model in ("irm", "prm"):
        out = tmp_path / model
        code = main(["rm-check", "--model", str(tmp_path / "run" / "04_reward_models" / model), "--params",
                     str(TINY_PARAMS), "--set", f'base.output_dir="{tmp_path / "run"}"', "--out", str(out)])
        result = json.loads((out / "rm_check.json").read_text())
        assert code == (1 if result["failed"] else 0) and (out / "rm_check.html").exists()
        found.update({v["check"]: v for v in result["verdicts"]})
    probes = {c for c in gate if c.startswith(("irm_probe_", "prm_probe_"))}
    assert probes and probes | {"irm_distribution"} == set(found), (sorted(gate), sorted(found))
    same = {c for c in found if found[c]["thresholds"].get("direction") == "same"}  # must stay within a tolerance
    assert {c: found[c]["status"] for c in found if c not in same} == {c: gate[c]["status"] for c in found
                                                                       if c not in same}
    for check in same:  # |change of rA| >= |change of rI * rA| (rI <= 1): rm-check keeps no more pairs within it
        assert found[check]["numbers"]["moved_right"] <= gate[check]["numbers"]["moved_right"] + 1e-12, check
    for check in [c for c in found if c.startswith("irm_")]:  # the IRM's: the gate's numbers too
        for key, value in gate[check]["numbers"].items():
            assert found[check]["numbers"][key] == pytest.approx(value, abs=1e-6), (check, key)


# ------------------------------------------------------------------ what rleif run leaves beside the figures


def test_rleif_run_streamed_progress_lines_for_sft_the_reward_models_and_ppo(tiny_run):
    """Each long stage printed progress lines, streamed to the terminal (counted in run.json) and kept in its log.
    SFT logs every 20 of 500 steps; the progress lines come at most every 10 s, and always for the last step."""
    from rleif_kit.core.progress import LINE

    reports = tiny_run / "reports"
    run = json.loads((reports / "run.json").read_text())
    assert {s: v["status"] for s, v in run["stages"].items()} == {s: "ok" for s in STAGES.split(",")}
    labels = {"03_sft": ["[03_sft] step"], "04_reward_models": ["[04_reward_models irm] step",
                                                                "[04_reward_models prm] step"],
              "05_ppo": ["[05_ppo] step"]}
    for stage, prefixes in labels.items():
        log = (reports / run["stages"][stage]["log"]).read_text()
        lines = [line for line in log.splitlines() if LINE.match(line)]
        for prefix in prefixes:
            mine = [line for line in lines if line.startswith(prefix)]
            assert len(mine) >= 2 and "done in" in mine[-1], (stage, prefix, mine[-3:])
        assert run["stages"][stage]["lines_shown"] >= len(lines) >= 2 * len(prefixes)
    assert "[05_ppo] step 40/40" in (reports / "logs" / "05_ppo.log").read_text()
    assert "without encryption" not in "".join(p.read_text() for p in (reports / "logs").glob("*.log"))


def test_tensorboard_event_files_for_sft_the_reward_models_and_ppo(tiny_run):
    """The tiny preset logs to TensorBoard ([base] report_to); the event files read back with TensorBoard's own
    reader: the trainers' loss curves and every numeric column of the PPO log."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    board = tiny_run / "run" / "tensorboard"
    assert sorted(p.name for p in board.iterdir()) == ["03_sft", "04_irm", "04_prm", "05_ppo"]
    tags = {}
    for folder in board.iterdir():
        events = EventAccumulator(str(folder))
        events.Reload()
        tags[folder.name] = set(events.Tags()["scalars"])
        assert len(events.Scalars(sorted(tags[folder.name])[0])) >= 2
    assert "train/loss" in tags["03_sft"] and "train/loss" in tags["04_irm"] and "train/loss" in tags["04_prm"]
    ppo_log = [json.loads(line) for line in (tiny_run / "run" / "05_ppo" / "log.jsonl").read_text().splitlines()]
    assert {"reward/reward_mean", "reward/rA_mean", "ppo/kl", "ppo/entropy"} <= tags["05_ppo"]
    events = EventAccumulator(str(board / "05_ppo"))
    events.Reload()
    assert [round(e.value, 5) for e in events.Scalars("reward/reward_mean")] == \
        [round(r["reward_mean"], 5) for r in ppo_log]


def test_the_run_and_its_reports_moved_elsewhere_resume_with_every_stage_skipped(tiny_run, tmp_path):
    """A copy of the shared run's folder and reports, pointed at by new absolute overrides (as from another
    checkout): no marker holds an absolute path, so every stage is complete and unchanged."""
    moved = tmp_path / "elsewhere"
    shutil.copytree(tiny_run / "run", moved / "run", ignore=shutil.ignore_patterns("tensorboard"))
    shutil.copytree(tiny_run / "reports", moved / "reports")
    for marker in (moved / "run").glob("*/.done.json"):
        assert str(tiny_run) not in marker.read_text(), marker
    assert run_tiny(moved) == []
    run = json.loads((moved / "reports" / "run.json").read_text())
    assert {s: v["status"] for s, v in run["stages"].items()} == {s: "skipped" for s in STAGES.split(",")}
    assert "01_evolve" in (moved / "reports" / "index.html").read_text()


def test_the_report_names_the_arithmetic_world_and_its_reward_and_no_row_it_lacks(tiny_run, tmp_path):
    """The arithmetic world's page: arith and r = rI · rA, no GSM8k scorer rows (its benchmark has none)."""
    from browser import assert_page_speaks_its_world

    assert_page_speaks_its_world(tmp_path, tiny_run / "reports", "arith", "r = rI · rA",
                                 never=("r = rI · rV",))
