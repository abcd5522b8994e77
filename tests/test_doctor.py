"""``rleif doctor``: the table of verdicts and the exit code, on hand-made run directories and the
loopback fake endpoint (no network, no model but the slow notebook run); and 07_reward_diagnostics
executed headless."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, TINY_PARAMS, tiny_overrides
from test_health import build_reward_models, make_run

from rleif_kit.pipeline.cli import main
from rleif_kit.pipeline.doctor import check_trackers, needed_roles, run_doctor
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.core.jsonl import write_jsonl

ENV = "RLEIF_DOCTOR_TEST_KEY"


def doctor(run, *extra, settings=None):
    return run_doctor(str(TINY_PARAMS), tiny_overrides(run, "dedup.min_kept=50", *extra), settings, score=False,
                      workdir=ROOT)


def statuses(report):
    return {v.check: v.status for v in report.verdicts}


def test_healthy_run_passes_with_every_row(tmp_path):
    run = tmp_path / "run"
    make_run(run)
    report = doctor(run)
    s = statuses(report)
    assert report.ok and "fail" not in s.values()
    assert [c for c in s][:5] == ["config", "base_model", "irm_base", "prm_base", "evolve_temperature"]
    assert {"evolve_failures", "duplicate_rate", "kept_floor", "step_format", "prompt_consistency", "low_ra_share",
            "kl_blowup", "sft_vs_ppo_arith"} <= set(s)
    assert "settings" not in s  # the tiny preset calls no endpoint
    table = report.table()
    assert "skipped irm_distribution, prm_distribution, probes: scoring switched off" in table
    assert table.splitlines()[-1] == f"{len(s)} ok, 0 warn, 0 fail"


def test_a_failed_check_fails_the_command(tmp_path, capsys, monkeypatch):
    run = tmp_path / "run"
    make_run(run, kl=12.0)  # KL blow-up from the first step
    monkeypatch.chdir(ROOT)
    code = main(["doctor", str(TINY_PARAMS), "--no-score", *sum((["--set", o] for o in
                                                                 tiny_overrides(run, "dedup.min_kept=50")), [])])
    out = capsys.readouterr().out
    assert code == 1
    line = next(l for l in out.splitlines() if l.startswith("kl_blowup"))
    assert "FAIL" in line and "max_kl=12" in line and "05_ppo/log.jsonl" in line
    assert "kl_coef to 0.1" in out and out.splitlines()[-1].endswith("1 fail")


def test_bad_config_is_one_failed_row(tmp_path):
    report = doctor(tmp_path / "run", "ppo.clip_range=-0.2")
    assert [(v.check, v.status) for v in report.verdicts] == [("config", "fail")]
    assert "[ppo] clip_range = -0.2: expected a value > 0" in report.verdicts[0].advice and not report.ok


def test_report_to_names_the_package_to_install_before_the_run(tmp_path, monkeypatch):
    """issue 44: a tracker whose package is missing, or one our PPO loop cannot log to, is a warn row with what to
    do; the tiny preset's TensorBoard is ok; no report_to, no row."""
    from rleif_kit.core.config import load_config
    from rleif_kit.models import trackers

    def rows(*extra):
        return check_trackers(load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", *extra)))

    monkeypatch.setattr(trackers, "missing_package", lambda name: {"wandb": "wandb"}.get(name, ""))
    (tiny,) = rows()
    assert (tiny.status, tiny.numbers, tiny.advice) == ("ok", {"trackers": "tensorboard"}, "")
    (row,) = rows('base.report_to=["tensorboard", "wandb", "neptune"]')
    assert row.status == "warn" and row.numbers == {"trackers": "tensorboard, wandb, neptune"}
    assert row.advice == ("pip install wandb (a stage trains without a tracker that is not installed); our PPO loop "
                          "cannot log to neptune (accelerate has no tracker for it); 05_ppo/log.jsonl has its curves")
    assert rows("base.report_to=[]") == []


def test_missing_base_model_fails(tmp_path):
    report = doctor(tmp_path / "run", "tiny.build=false", f'base.model_name="{tmp_path}/no-such-model"')
    v = {v.check: v for v in report.verdicts}["base_model"]
    assert v.status == "fail" and "resolves nowhere" in v.advice


def test_step_format_sample_before_sft(tmp_path):
    report = doctor(tmp_path / "run")  # nothing run yet: 10 problems of arith:30000
    v = {v.check: v for v in report.verdicts}["step_format"]
    assert v.status == "ok" and v.numbers["sampled"] == 10 and v.source == "[sft] dataset = arith:30000"
    data = tmp_path / "plain.jsonl"
    write_jsonl(data, [{"instruction": f"Q{i}", "response": f"It is {i} + 1 = {i + 1}. The answer is: {i + 1}"}
                       for i in range(12)])
    report = doctor(tmp_path / "run", f'sft.dataset="{data}"')
    v = {v.check: v for v in report.verdicts}["step_format"]
    assert v.status == "fail" and v.numbers == {"sampled": 10, "share_with_steps": 0.0} and not report.ok


def test_endpoint_run_needs_settings(tmp_path):
    report = doctor(tmp_path / "run", 'evol_instruct.backend="openai"')
    v = {v.check: v for v in report.verdicts}["settings"]
    assert v.status == "fail" and v.numbers == {"roles_needed": ["evolve", "irm_judge"]}


def settings_file(tmp_path, server):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": ENV, "timeout": 5},
                                "models": {"evolve": "evolver", "irm_judge": "judge"}}))
    return str(path)


def test_keys_and_endpoints(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, "sk-doctor-test-0000")
    with FakeOpenAIServer(responder=lambda body: "ok") as server:
        report = doctor(tmp_path / "run", 'evol_instruct.backend="openai"', settings=settings_file(tmp_path, server))
        assert server.counters["requests"] == 2  # one round trip per role
    s = statuses(report)
    assert s["settings"] == "ok" and s["endpoint_evolve"] == "ok" and s["endpoint_irm_judge"] == "ok"
    assert "sk-doctor-test-0000" not in report.table()


def test_missing_key_fails_only_for_a_role_the_run_needs(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    with FakeOpenAIServer() as server:
        path = settings_file(tmp_path, server)
        needed = doctor(tmp_path / "run", 'evol_instruct.backend="openai"', settings=path)
        spare = doctor(tmp_path / "run", settings=path)  # the tiny preset calls neither role
        assert server.requests == []
    assert statuses(needed)["key_evolve"] == "fail" and f"{ENV} is not set" in needed.table()
    assert statuses(spare)["key_evolve"] == "warn" and spare.ok


def test_needed_roles():
    from rleif_kit.core.config import load_config

    def roles(*extra):
        return needed_roles(load_config(str(TINY_PARAMS), list(extra), workdir=ROOT))

    assert roles() == []
    assert roles('reward_model.prm_step_label="chatgpt_judged"') == ["prm_judge"]
    assert roles('eval.models=["served"]', 'eval.benchmarks=["gsm8k", "humaneval"]') == ["math_eval", "code_eval"]


# ---------------------------------------------------------------- the notebook, headless

@pytest.mark.slow
def test_notebook_07_on_a_hand_made_run(tmp_path, monkeypatch, small_model_dir):
    from rleif_kit.core.records import read_records
    from rleif_kit.pipeline.runner import run_pipeline

    run, reports = tmp_path / "run", tmp_path / "reports"
    make_run(run)
    build_reward_models(small_model_dir, run)
    monkeypatch.chdir(ROOT)
    run_pipeline(str(TINY_PARAMS), "07_reward_diagnostics",
                 tiny_overrides(run, "dedup.min_kept=50", "diagnostics.score_sample=8"), report_dir=str(reports))
    got = read_records(reports / "metrics.json")["07_reward_diagnostics"]
    verdicts = json.loads((run / "07_reward_diagnostics" / "verdicts.json").read_text())["verdicts"]
    assert got["verdicts"] == {v["check"]: v["status"] for v in verdicts}
    assert {"irm_distribution", "prm_distribution", "low_ra_share", "kl_blowup", "sft_vs_ppo_arith"} <= set(got["verdicts"])
    assert got["low_ra_share"] == pytest.approx(0.3) and got["max_kl"] == pytest.approx(0.5)
    assert got["ab"]["sft_vs_ppo_arith"]["gain"] == pytest.approx(0.3) and got["evolve_failed"] == 2
    assert 0 <= got["irm_mean"] <= 1 and got["fails"] == sum(s == "fail" for s in got["verdicts"].values())
    figures = {p.name for p in (reports / "figures").glob("07_*.png")}
    assert figures == {"07_score_histograms.png", "07_ppo_health.png", "07_sft_vs_ppo.png", "07_dedup_operators.png",
                       "07_probes.png"}
