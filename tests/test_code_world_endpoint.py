"""The code arm's endpoint path, offline (issue 28): Code Evol-Instruct through an OpenAI-compatible server (the
code loopback teacher, ``rleif_kit/testing/code_teacher.py``) on the tiny code world's seeds — the operator
templates, the equality judge, an answer in a ```python block and four tests per kept evolution, each task's tests
run against its answer in the sandbox and the evolution eliminated when they disagree."""

from __future__ import annotations

import json

from conftest import ROOT
from rleif_kit.core.config import load_config
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.settings import load_settings
from rleif_kit.evolve.stage import run_evolve
from rleif_kit.testing.code_teacher import serve_code
from rleif_kit.worlds import get_world
from rleif_kit.worlds.data import load_seeds


def test_code_evol_instruct_through_an_endpoint_keeps_tasks_whose_tests_pass_their_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("RLEIF_CODE_TEACHER_KEY", "sk-loopback")
    cfg = load_config(ROOT / "params" / "tiny-code.toml", [
        f'base.output_dir="{tmp_path}"', 'evol_instruct.backend="openai"', 'evol_instruct.seeds="tiny_code:30"',
        "evol_instruct.rounds=2", "evol_instruct.cache=false", "evol_instruct.concurrency=8"])
    paths = RunPaths(cfg.output_dir)
    server, teacher = serve_code(seed=1, wrong_tests=0.25)
    try:
        teacher.learn(load_seeds(cfg, paths))
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_CODE_TEACHER_KEY",
                                                "timeout": 10, "max_retries": 1}, "models": {"evolve": "teacher"}}))
        result = run_evolve(cfg, paths, load_settings(settings), progress=False)
    finally:
        server.stop()
    kept = [json.loads(x) for x in paths.evolved.read_text().splitlines()]
    eliminated = [json.loads(x) for x in paths.eliminated.read_text().splitlines()]
    assert len(kept) + len(eliminated) == 60 and not paths.evolve_failed.read_text().strip()  # 30 seeds x 2 rounds
    assert {"evolve", "equality", "answer", "tests"} <= set(teacher.asked)
    assert teacher.asked["tests"] == teacher.asked["answer"]  # every answered evolution was asked for its tests
    assert any(r["reason"] == "tests_fail" for r in eliminated)  # a wrong expected value: the sandbox caught it
    world = get_world("tiny_code")
    for r in kept:  # the endpoint's tests are the record's, and its answer passes every one of them
        assert r["problem"]["entry_point"] == "f" and len(r["problem"]["tests"]) == 4
        assert world.verify(r, r["answer"]) == 1.0
        assert "Here's the rewritten task" not in r["text"]  # the preamble was cleaned off
    assert result is not None
