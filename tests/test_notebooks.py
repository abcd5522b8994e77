"""Notebook tests: the pipeline's notebooks run headless with papermill on the tiny preset, and the
recorded metrics are asserted. Loopback servers only; no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.fake_openai import FakeOpenAIServer
from rleif_kit.records import read_records
from rleif_kit.runner import run_pipeline

pytestmark = pytest.mark.slow

FAKE_KEY = "sk-rleif-test-0123456789abcdefSECRET"


def _files_containing(root: Path, needle: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle in p.read_bytes()]


def test_sft_notebook_learns_arithmetic(tmp_path, monkeypatch):
    """The tiny preset's SFT (fixed steps and threads): held-out greedy accuracy >= 40% on 200 problems."""
    monkeypatch.chdir(ROOT)
    reports = tmp_path / "reports"
    runs = run_pipeline(str(TINY_PARAMS), "00_setup,03_sft", tiny_overrides(tmp_path / "run"),
                        report_dir=str(reports))
    assert [r.stage for r in runs] == ["00_setup", "03_sft"]
    sft = read_records(reports / "metrics.json")["03_sft"]
    assert sft["accuracy_before"] <= 0.05  # the untrained model is near 0%
    assert sft["accuracy_after"] >= 0.40, sft
    assert sft["final_loss"] < 0.5 * sft["first_loss"]
    assert sft["steps"] == 500 and sft["examples"] == 30_040  # 30,000 arith + 40 open-domain
    assert sft["verdicts"] == {"step_format": "ok", "sft_learning": "ok"}
    assert (reports / "03_sft.ipynb").exists() and (reports / "figures" / "03_sft_loss.png").exists()
    assert (tmp_path / "run" / "03_sft" / "model" / "model.safetensors").exists()
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert {"00_setup", "03_sft"} <= set(manifest["stages"]) and manifest["versions"]["trl"]


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


def test_evolve_notebook_runs_the_arith_backend_offline(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    reports = tmp_path / "reports"
    run_pipeline(str(TINY_PARAMS), "01_evolve", tiny_overrides(tmp_path / "run"), report_dir=str(reports))
    ev = read_records(reports / "metrics.json")["01_evolve"]
    # 400 seeds x 3 rounds, every lineage decided each round
    assert ev["kept"] + ev["eliminated"] == 1200 and ev["failed"] == 0 and ev["duplicate_ids"] == 0
    assert 0.05 < ev["eliminated"] / 1200 < 0.35  # defect_rate 0.2, part of it caught here
    assert {"leaked_template", "unparseable"} <= set(ev["reasons"])
    assert ev["cost_usd"] == 0.0 and (reports / "figures" / "01_evolve_operators.png").exists()


def test_dedup_notebook_removes_a_realistic_share_and_builds_sft_data(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    reports, run_dir = tmp_path / "reports", tmp_path / "run"
    run_pipeline(str(TINY_PARAMS), "01_evolve,02_dedup", tiny_overrides(run_dir), report_dir=str(reports))
    dd = read_records(reports / "metrics.json")["02_dedup"]
    assert dd["total"] == 400 + read_records(reports / "metrics.json")["01_evolve"]["kept"]
    assert 0.10 <= dd["removed_share"] <= 0.40, dd  # the tiny preset's threshold is chosen for this band
    assert dd["removed_by_layer"].get("semantic", 0) > 0
    removed = [json.loads(line) for line in (run_dir / "02_dedup" / "removed.jsonl").read_text().splitlines()]
    assert all(r["duplicate_of"] and r["layer"] for r in removed)
    sft_rows = (run_dir / "02_dedup" / "sft.jsonl").read_text().splitlines()
    sources = {json.loads(line)["source"] for line in sft_rows}
    assert sources == {"stepwise", "evolved", "open_domain"}
    assert (reports / "figures" / "02_dedup_similarity.png").exists()
    assert dd["sft_evolved"] > 0 and dd["sft_share_truncated"] == 0.0
    assert dd["verdicts"] == {"evolve_temperature": "ok", "kept_floor": "ok", "operator_share": "ok", "step_format": "ok"}


def test_dedup_removes_a_planted_test_item_by_ngram_and_by_embedding(tmp_path, monkeypatch):
    """A held-out problem copied into the evolved set is caught (n-gram), and so is a paraphrase (embedding)."""
    from rleif_kit.dedup_stage import run_dedup
    from rleif_kit.evolve import run_evolve
    from rleif_kit.setup import setup

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
