"""Judge labelling through a loopback OpenAI-compatible server: IRM rankings and PRM step verdicts.

The fake judge reads the prompt it is sent, so its answers are right by construction; what is tested
is the plumbing: prompts, parsing, retries of malformed answers, failure records, resume, reports.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.config import load_config
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.rewards.irm_data import pairs_from_scores
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.rewards.judge_labels import (MAX_ATTEMPTS, format_steps, judge_irm_rankings, judge_prm_labels, ranking_pairs,
                                    report_path)
from rleif_kit.core.settings import SettingsError, load_settings

FAKE_KEY = "sk-judge-test-key-0123456789abcdef"
OPERATORS = ("deepen", "concretize", "add_constraints", "increase_reasoning")


def _cfg(tmp_path, *extra):
    return load_config(TINY_PARAMS, tiny_overrides(tmp_path / "run", "evol_instruct.concurrency=4",
                                                   "evol_instruct.cache=false", *extra), workdir=ROOT)


def _settings(tmp_path, server, models=None):
    path = tmp_path / "settings.json"
    models = models or {"irm_judge": "fake-judge", "prm_judge": "fake-judge"}
    path.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_JUDGE_KEY",
                                        "timeout": 5, "max_retries": 0}, "models": models,
                                "prices": {"fake-judge": {"input_per_million": 1.0, "output_per_million": 2.0}}}))
    return load_settings(path)


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("RLEIF_JUDGE_KEY", FAKE_KEY)


def _groups(n: int, k: int = 4) -> list[list[dict]]:
    """n sibling sets of k variants; the quality the fake judge ranks by is written in each text."""
    return [[{"id": f"g{g}-{OPERATORS[i]}", "sibling_group": f"g{g}", "operator": OPERATORS[i],
              "text": f"Problem {g}.{i} of quality {(g + 3 * i) % k}."} for i in range(k)] for g in range(n)]


def _quality(record: dict) -> int:
    return int(re.search(r"quality (\d+)", record["text"]).group(1))


def ranking_judge(body: dict) -> str:
    """Ranks the variants of the prompt best-first by the quality number in their text."""
    variants = re.findall(r"Variant ([A-Z]):\n.*? of quality (\d+)\.", body["messages"][-1]["content"])
    order = sorted(variants, key=lambda v: -int(v[1]))
    return "Variant B reads best, then the rest.\nRanking: " + " > ".join(letter for letter, _ in order)


def test_well_formed_rankings_give_every_pair_of_each_set(tmp_path):
    groups = _groups(6)
    with FakeOpenAIServer(responder=ranking_judge, require_key=FAKE_KEY) as server:
        out = tmp_path / "irm_rankings.jsonl"
        cfg = _cfg(tmp_path, "evol_instruct.cache=true")  # the cache file is scanned for the key below
        pairs = judge_irm_rankings(cfg, _settings(tmp_path, server), groups, out, progress=False)
        assert len(server.requests) == 6  # one request per set
    records = {r["id"]: r for r in read_jsonl(out)}
    assert set(records) == {f"g{g}" for g in range(6)} and all(r["status"] == "ok" for r in records.values())
    all_pairs = []
    for siblings in groups:
        ranked = ranking_pairs(siblings, records[siblings[0]["sibling_group"]]["label"])
        # k = 4 variants ranked A > B > C > D: A beats 3, B beats 2, C beats 1 -> 3 + 2 + 1 = 6 = 4*3/2 pairs
        assert len(ranked) == 6
        # a strict ranking gives exactly the pairs the programmatic path gives from the same scores
        expected = pairs_from_scores(siblings, [_quality(r) for r in siblings])
        assert sorted(map(json.dumps, ranked)) == sorted(map(json.dumps, expected))
        all_pairs += ranked
    # balanced: a subset, no duplicate, and no operator above twice the rarest one's count
    assert pairs and all(p in all_pairs for p in pairs)
    assert len({(p["chosen_id"], p["rejected_id"]) for p in pairs}) == len(pairs)
    counts = [sum(p["operator"] == op for p in pairs) for op in {p["operator"] for p in pairs}]
    assert max(counts) <= 2 * min(counts)
    report = json.loads(report_path(out).read_text())
    assert report["ok"] == 6 and report["failed"] == {} and report["pending"] == 0
    assert report["usage"]["requests"] == 6 and report["usage"]["cost_usd"] > 0
    assert out.with_suffix(".cache.sqlite").exists()
    for path in tmp_path.rglob("*"):  # the key reached the server, never a file
        assert not path.is_file() or FAKE_KEY.encode() not in path.read_bytes()


def test_a_malformed_answer_is_asked_again_and_then_succeeds(tmp_path):
    def judge(body: dict) -> str:  # the first ask (temperature 0) is malformed, the retry is fine
        return "They are all good." if body["temperature"] == 0 else ranking_judge(body)

    with FakeOpenAIServer(responder=judge) as server:
        out = tmp_path / "irm.jsonl"
        pairs = judge_irm_rankings(_cfg(tmp_path), _settings(tmp_path, server), _groups(3), out, progress=False)
        assert len(server.requests) == 6
    assert pairs
    assert all(r["status"] == "ok" and r["attempts"] == 2 for r in read_jsonl(out))
    assert json.loads(report_path(out).read_text())["retried"] == 3


def test_an_always_malformed_answer_is_recorded_failed_and_never_guessed(tmp_path):
    with FakeOpenAIServer(responder=lambda body: "Ranking: A > A > B") as server:  # repeats a label
        out, cfg, settings = tmp_path / "irm.jsonl", _cfg(tmp_path), _settings(tmp_path, server)
        # every label failed: 04 must not train on nothing; they failed for good, so not a resumable stop
        with pytest.raises(ValueError, match=r"every one of 2 irm_judge labels failed \(mostly unparseable\)"
                                             r"[\s\S]*'Ranking: A > A > B'[\s\S]*failed for good"):
            judge_irm_rankings(cfg, settings, _groups(2), out, progress=False)
        assert len(server.requests) == 2 * MAX_ATTEMPTS
        records = list(read_jsonl(out))
        assert [r["status"] for r in records] == ["failed", "failed"]
        assert all(r["reason"] == "unparseable" and r["answer"] == "Ranking: A > A > B" for r in records)
        with pytest.raises(ValueError, match="failed for good"):  # a rerun: final, nothing asked again
            judge_irm_rankings(cfg, settings, _groups(2), out, progress=False)
        assert len(server.requests) == 2 * MAX_ATTEMPTS
    assert json.loads(report_path(out).read_text())["failed"] == {"unparseable": 2}


def test_a_budget_stop_then_a_resume_asks_only_the_undecided_sets(tmp_path):
    groups = _groups(5)
    with FakeOpenAIServer(responder=ranking_judge) as server:
        out, settings = tmp_path / "irm.jsonl", _settings(tmp_path, server)
        cfg = _cfg(tmp_path, "evol_instruct.max_requests=2", "evol_instruct.concurrency=1")
        from rleif_kit.core.exits import StageIncomplete

        with pytest.raises(StageIncomplete, match=r"3 of 5 labels not asked \(budget: max_requests reached"):
            judge_irm_rankings(cfg, settings, groups, out, progress=False)  # 04 must not train on 2 of 5
        report = json.loads(report_path(out).read_text())
        assert report["stopped_reason"].startswith("budget") and report["ok"] == 2 and report["pending"] == 3
        with open(out, "a") as f:
            f.write('{"id": "g4", "sta')  # a torn last line, as a kill mid-write leaves it
        judge_irm_rankings(_cfg(tmp_path), settings, groups, out, progress=False)
        assert len(server.requests) == 5  # 2 + the 3 undecided: no finished set asked twice
    assert sorted(r["id"] for r in read_jsonl(out)) == [f"g{g}" for g in range(5)]
    assert json.loads(report_path(out).read_text())["resumed"] == 2


def test_a_crash_mid_run_then_a_resume_does_not_re_ask_finished_sets(tmp_path, monkeypatch):
    import rleif_kit.rewards.judge_labels as jl

    class CrashingWriter(jl.JsonlWriter):
        def write(self, record):
            if self.count == 3:
                raise RuntimeError("killed")
            super().write(record)

    groups = _groups(8)
    with FakeOpenAIServer(responder=ranking_judge) as server:
        out, settings = tmp_path / "irm.jsonl", _settings(tmp_path, server)
        monkeypatch.setattr(jl, "JsonlWriter", CrashingWriter)
        with pytest.raises(RuntimeError, match="killed"):
            judge_irm_rankings(_cfg(tmp_path), settings, groups, out, progress=False)
        monkeypatch.undo()
        monkeypatch.setenv("RLEIF_JUDGE_KEY", FAKE_KEY)
        done_before, sent_before = {r["id"] for r in read_jsonl(out)}, len(server.requests)
        assert len(done_before) == 3
        judge_irm_rankings(_cfg(tmp_path), settings, groups, out, progress=False)
        asked = [re.findall(r"Problem (\d+)\.", r.body["messages"][-1]["content"])[0]
                 for r in server.requests[sent_before:]]
        assert sorted(f"g{g}" for g in asked) == sorted({f"g{g}" for g in range(8)} - done_before)


def test_a_failing_endpoint_is_retried_by_every_rerun_and_stops_04_each_time(tmp_path):
    """A 500 is the endpoint's fault, not the item's: never given up, every rerun asks again and stops 04 (exit 4)
    with the cause and the server's text, until the endpoint answers."""
    from rleif_kit.core.exits import StageIncomplete

    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("500",)) as server:
        out, cfg, settings = tmp_path / "irm.jsonl", _cfg(tmp_path), _settings(tmp_path, server)
        for run in range(cfg.evol_instruct.retry_failed + 1):
            with pytest.raises(StageIncomplete, match=r"every one of 1 irm_judge labels failed \(mostly http 5xx\)"
                                                      r"[\s\S]*http 500: The server had an error"):
                judge_irm_rankings(cfg, settings, _groups(1), out, progress=False)
        assert len(server.requests) == cfg.evol_instruct.retry_failed + 1  # every run asked again
        server.fail_rate = 0.0
        server.responder = ranking_judge
        assert judge_irm_rankings(cfg, settings, _groups(1), out, progress=False)  # recovered: pairs, no raise
    failures = json.loads((tmp_path / "run" / "04_reward_models" / "failures.json").read_text())
    assert failures["status"] == "ok" and failures["failed"] == 0


def test_a_request_the_server_refuses_is_given_up_after_retry_failed_runs(tmp_path):
    with FakeOpenAIServer(fail_rate=1.0, fail_modes=("400",)) as server:
        out, cfg, settings = tmp_path / "irm.jsonl", _cfg(tmp_path), _settings(tmp_path, server)
        for run in range(cfg.evol_instruct.retry_failed + 1):
            with pytest.raises(Exception, match="irm_judge labels failed"):
                judge_irm_rankings(cfg, settings, _groups(1), out, progress=False)
        assert len(server.requests) == cfg.evol_instruct.retry_failed  # the last run asked nothing
    statuses = [r["status"] for r in read_jsonl(out)]
    assert statuses == ["api_error"] * (cfg.evol_instruct.retry_failed - 1) + ["failed"]
    assert list(json.loads(report_path(out).read_text())["failed"]) == [
        "api: http 400: This request exceeds the model's context length (injected)."]


def step_judge(body: dict) -> str:
    """Recomputes each 'Step i: a op b = c.' line of the prompt's solution."""
    solution = body["messages"][-1]["content"].split("Solution (", 1)[1]
    lines = re.findall(r"^Step (\d+): (\d+) ([-+*]) (\d+) = (\d+)\.$", solution, re.M)
    ops = {"+": int.__add__, "-": int.__sub__, "*": int.__mul__}
    return "\n".join(f"Step {i}: {'correct' if ops[op](int(a), int(b)) == int(c) else 'incorrect'}"
                     for i, a, op, b, c in lines)


def test_prm_step_labels_are_judged_per_step(tmp_path):
    items = [{"id": "s1", "question": "What is 2 + 3, times 4?", "solution": "...",
              "steps": ["Step 1: 2 + 3 = 5.", "Step 2: 5 * 4 = 21."]},
             {"id": "s2", "question": "What is 7 - 2?", "solution": "...", "steps": ["7 - 2 = 5."]},
             {"id": "s3", "question": "No steps here", "solution": "The answer is: 4", "steps": []}]
    assert format_steps(items[0]["steps"]) == "Step 1: 2 + 3 = 5.\nStep 2: 5 * 4 = 21."
    with FakeOpenAIServer(responder=step_judge) as server:
        out = tmp_path / "prm.jsonl"
        labelled = judge_prm_labels(_cfg(tmp_path), _settings(tmp_path, server), items, out, progress=False)
        assert len(server.requests) == 2  # nothing is asked about a solution without steps
    assert labelled == [{"id": "s1", "question": items[0]["question"], "solution": "...", "labels": [True, False]},
                        {"id": "s2", "question": items[1]["question"], "solution": "...", "labels": [True]}]
    assert json.loads(report_path(out).read_text())["failed"] == {"no_steps": 1}


def test_prm_answers_with_the_wrong_number_of_steps_are_retried(tmp_path):
    def judge(body: dict) -> str:
        return "Step 1: correct" if body["temperature"] == 0 else step_judge(body)

    items = [{"id": "s1", "question": "q", "solution": "...", "steps": ["1 + 1 = 2.", "2 + 2 = 5."]}]
    with FakeOpenAIServer(responder=judge) as server:
        labelled = judge_prm_labels(_cfg(tmp_path), _settings(tmp_path, server), items, tmp_path / "p.jsonl",
                                    progress=False)
        assert len(server.requests) == 2
    assert labelled[0]["labels"] == [True, False]


def test_a_missing_judge_model_names_the_settings_key(tmp_path):
    with FakeOpenAIServer() as server:
        settings = _settings(tmp_path, server, models={"evolve": "fake-evolver"})
        with pytest.raises(SettingsError, match=r"models\.irm_judge"):
            judge_irm_rankings(_cfg(tmp_path), settings, _groups(1), tmp_path / "irm.jsonl", progress=False)
        with pytest.raises(SettingsError, match=r"models\.prm_judge"):
            judge_prm_labels(_cfg(tmp_path), settings, [], tmp_path / "prm.jsonl", progress=False)
        with pytest.raises(ValueError, match=r"models\.prm_judge"):
            judge_prm_labels(_cfg(tmp_path), None, [], tmp_path / "prm.jsonl", progress=False)
        assert server.requests == []
    assert not (tmp_path / "irm.jsonl").exists()
