"""Notebook tests: the pipeline's notebooks run headless with papermill on the tiny preset, and the
recorded metrics are asserted. Loopback servers only; no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.core.records import read_records
from rleif_kit.pipeline.runner import run_pipeline

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-rleif-test-0123456789abcdefSECRET"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_check_api_in_a_notebook_sends_the_key_and_never_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("RLEIF_TEST_KEY", FAKE_KEY)
    reports, run_dir = tmp_path / "reports", tmp_path / "run"
    with FakeOpenAIServer(require_key=FAKE_KEY) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({
            "api": {"base_url": server.base_url, "api_key_env": "RLEIF_TEST_KEY", "timeout": 10, "max_retries": 0},
            "models": {"evolve": "m-evolve", "irm_judge": "m-judge", "prm_judge": "m-judge"},
        }))
        run_pipeline(str(TINY_PARAMS), "00_setup", tiny_overrides(run_dir), settings_path=str(settings),
                     report_dir=str(reports))
        chats = [r for r in server.requests if r.path.endswith("/chat/completions")]
    # positive control: the key really travelled, to the server and only there
    assert len(chats) == 3 and all(r.headers["authorization"] == f"Bearer {FAKE_KEY}" for r in chats)
    assert read_records(reports / "metrics.json")["00_setup"]["endpoints_ok"] == 3
    for root in (reports, run_dir, tmp_path):
        assert _files_containing(root, FAKE_KEY.encode()) == []
        assert _files_containing(root, FAKE_KEY[-12:].encode()) == []


def test_a_wrong_key_is_redacted_in_the_notebook(tmp_path, monkeypatch):
    """The server's 401 quotes part of the key it got; the executed notebook must not keep it."""
    monkeypatch.chdir(ROOT)
    wrong = "sk-wrong-key-abcdefghijklmnop"
    monkeypatch.setenv("RLEIF_TEST_KEY", wrong)
    reports = tmp_path / "reports"
    with FakeOpenAIServer(require_key=FAKE_KEY) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_TEST_KEY",
                                                "max_retries": 0},
                                        "models": {"evolve": "m"}}))
        run_pipeline(str(TINY_PARAMS), "00_setup", tiny_overrides(tmp_path / "run"), settings_path=str(settings),
                     report_dir=str(reports))
    assert read_records(reports / "metrics.json")["00_setup"]["endpoints_ok"] == 0
    assert _files_containing(tmp_path / "reports", wrong.encode()) == []
    assert _files_containing(tmp_path / "reports", wrong[-4:].encode()) == []


def test_dedup_removes_a_planted_test_item_by_ngram_and_by_embedding(tmp_path, monkeypatch):
    """A held-out problem copied into the evolved set is caught (n-gram), and so is a paraphrase (embedding)."""
    from rleif_kit.dedup.stage import run_dedup
    from rleif_kit.evolve.stage import run_evolve
    from rleif_kit.core.run_setup import setup

    monkeypatch.chdir(ROOT)
    extra = ('evol_instruct.seeds="arith:40"', "evol_instruct.rounds=1", "dedup.decontam_embedding=true",
             "dedup.decontam_threshold=0.9")
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", *extra), stage="01_evolve",
                       report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    run_evolve(cfg, paths, progress=False)
    heldout = [json.loads(line) for line in paths.arith_heldout.read_text().splitlines()[:2]]
    planted = [{"id": "planted-copy", "root_id": "planted-copy", "round": 1, "operator": "concretize",
                "direction": "up", "text": heldout[0]["question"], "answer": heldout[0]["solution"]},
               {"id": "planted-paraphrase", "root_id": "planted-paraphrase", "round": 1, "operator": "concretize",
                "direction": "up", "text": heldout[1]["question"].replace(".", " !").lower(), "answer": None}]
    with open(paths.stage("01_evolve") / "evolved.jsonl", "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in planted)
    result = run_dedup(cfg, paths, progress=False)
    removed = {r["id"]: r for r in map(json.loads, (paths.stage("02_dedup") / "removed.jsonl").read_text().splitlines())}
    assert removed["planted-copy"]["layer"] == "decontam_ngram"
    assert removed["planted-paraphrase"]["layer"].startswith("decontam_")
    assert result.contaminated >= 2
    listed = json.loads((paths.stage("02_dedup") / "dedup_report.json").read_text())["contaminated_items"]
    assert {"planted-copy", "planted-paraphrase"} <= {c["id"] for c in listed}
