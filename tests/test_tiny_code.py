"""The WizardCoder arm on a CPU: params/tiny-code.toml, 00_setup to 07_reward_diagnostics, once per session. The
recorded figures are asserted against tests/baselines/tiny-code.json, and each stage by what it must show: the
evolved tasks' tests checked in the sandbox, SFT copying the teacher's faults, PPO on the execution reward
unlearning them, the sandbox's seconds in the PPO log, and 07's verdicts on a code run."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, baseline_misses
from test_tiny_math import _jsonl, metrics
from rleif_kit.worlds.tiny_code.tasks import Task

pytestmark = pytest.mark.slow

BASELINES = ROOT / "tests" / "baselines" / "tiny-code.json"


def test_figures_match_the_baselines(code_run):
    off = baseline_misses(code_run / "reports" / "metrics.json", BASELINES)
    assert off == [], "\n".join(off)


def test_evolution_checked_every_kept_tasks_tests_against_its_answer(code_run):
    ev = metrics(code_run, "01_evolve")
    assert ev["kept"] + ev["eliminated"] == 600 and ev["failed"] == 0  # 200 seeds x 3 rounds
    assert {"tests_fail", "leaked_template", "no_new_information"} <= set(ev["reasons"])
    kept = _jsonl(code_run / "run" / "01_evolve" / "evolved.jsonl")
    assert not any(r["defect"] in ("tests_wrong", "answer_wrong") for r in kept)  # the sandbox caught them all
    assert all(r["problem"]["tests"] and r["answer"].startswith("```python") for r in kept)


def test_sft_learns_the_tasks_and_copies_the_teachers_faults(code_run):
    sft = metrics(code_run, "03_sft")
    assert sft["accuracy_before"] == 0.0 and sft["accuracy_after"] >= 0.35, sft
    assert sft["final_loss"] < 0.1 * sft["first_loss"] and sft["verdicts"] == {"step_format": "ok",
                                                                                "sft_learning": "ok"}
    rows = _jsonl(code_run / "run" / "03_sft" / "eval_after.jsonl")
    held = {p["id"]: p for p in _jsonl(code_run / "run" / "tiny_code" / "heldout.jsonl")}
    faulty = [r for r in rows if Task.from_problem(held[r["id"]]["problem"]).faulty]
    clean = [r for r in rows if not Task.from_problem(held[r["id"]]["problem"]).faulty]
    share = lambda rs: sum(r["correct"] for r in rs) / len(rs)  # noqa: E731
    assert share(faulty) < share(clean) - 0.2, (share(faulty), share(clean))  # the pitfalls are where it fails


def test_ppo_on_the_execution_reward_beats_sft_and_logs_the_sandbox(code_run):
    ppo = metrics(code_run, "05_ppo")
    assert ppo["steps"] == 30 and ppo["stopped"] == ""
    assert ppo["ppo_accuracy"] - ppo["sft_accuracy"] >= 0.10, ppo
    log = _jsonl(code_run / "run" / "05_ppo" / "log.jsonl")
    assert all(0 <= r["rV_mean"] <= 1 and r["rV_missing_share"] == 0 and r["right_share"] is not None for r in log)
    assert all(0 < r["verify_s"] < r["step_s"] for r in log)  # the sandbox's seconds, part of each step's
    timing = ppo["timing"]
    assert 0 < timing["verify_share"] < 1 and timing["step_s"] > 0
    gate = {v["check"]: v["status"] for v in json.loads((code_run / "run" / "05_ppo" / "gate.json").read_text())}
    assert {k: v for k, v in gate.items() if k.startswith("verifier_probe")} == {
        f"verifier_probe_{e}": "ok" for e in ("off_by_one", "wrong_sign", "cut_code", "rename", "comment")}
    assert gate["reward_terms"] == "ok" and gate["reward_truth"] == "ok"
    assert "prm_distribution" not in gate  # r = rI * rV does not read the PRM: 07 judges it


def test_eval_measures_the_gain_with_its_interval(code_run):
    ev = metrics(code_run, "06_eval")
    gain = ev["ab"]["tiny_code"]
    assert gain["ci95"][0] > 0 and ev["verdicts"] == {"sft_vs_ppo_tiny_code": "ok"}
    assert ev["pass_at_1"]["ppo"]["tiny_code"] == ev["accuracy"]["ppo"]["tiny_code"]
    rows = _jsonl(code_run / "run" / "06_eval" / "ppo" / "tiny_code.jsonl")
    assert len(rows) == 300 and all(r["judged"] == "value" for r in rows)  # unforgeable: judged by value


def test_diagnostics_read_a_code_run(code_run):
    statuses = metrics(code_run, "07_reward_diagnostics")["verdicts"]
    assert statuses["step_format"] == "ok" and statuses["prompt_consistency"] == "ok"
    assert statuses["sft_vs_ppo_tiny_code"] == "ok" and statuses["reward_truth"] == "ok"
    assert all(statuses[k] in ("ok", "warn") for k in statuses if k.startswith("prm_probe"))  # not PPO's reward


def test_the_report_and_notebooks_speak_the_code_world_and_break_the_gain_down_by_family(code_run, tmp_path):
    """What a learner sees first: the page names tiny_code and r = rI · rV, never the arithmetic world's words nor
    GSM8k's scorer rows, and shows where the gain comes from, by task family (06 records the breakdown)."""
    from browser import assert_page_speaks_its_world, mentions, notebooks_text

    never = ("arithmetic", "The answer is", "WizardMath", "r = rI · rA")
    text = assert_page_speaks_its_world(tmp_path, code_run / "reports", "tiny_code", "r = rI · rV", never=never)
    families = {e["family"]: e for e in metrics(code_run, "06_eval")["families"]["tiny_code"]}
    assert {"range", "slice", "all"} <= set(families) and families["all"]["n"] == {"ppo": 300, "sft": 300}
    assert sum(e["n"]["sft"] for f, e in families.items() if f != "all") == 300
    assert all(f"{f} " in text for f in families)  # the one-glance table's rows
    # the whole gain sits in some families: PPO's right answers per family never all move together
    gains = {f: e["right"]["ppo"] - e["right"]["sft"] for f, e in families.items() if f != "all"}
    assert max(gains.values()) > 0 and sorted(gains.values())[0] <= max(gains.values()) / 4, gains
    assert {"syntax error", "wrong value"} & set(families["all"]["failures"]["sft"])
    # the notebooks: "WizardMath" may appear once, as a config value 00 prints whole ([eval] stop_list's version tag)
    said = [m for w in never if w != "WizardMath" for m in mentions(notebooks_text(code_run / "reports"), w)]
    assert said == [], "\n".join(said)
