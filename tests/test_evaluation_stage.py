"""06_eval wiring: the resumable per-item runner, stale results, the A/B, the endpoint path, the CLI,
and the notebook on the tiny preset.

Fake generators answer from a table (in-memory); the endpoint test uses a loopback server; the
local-model tests use the small tiny model. No network.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import shutil

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.evaluation.stage import evaluate_benchmark, run_eval, wrong_answers
from rleif_kit.worlds.prompts import math_prompt, wizardcoder_tabs
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.config import EvalConfig

EV = dataclasses.replace(EvalConfig(), max_new_tokens=32)


class FakeModel:
    """Answers each arithmetic prompt right, except the questions in ``wrong``; counts what it is asked."""

    chunk = 4

    def __init__(self, items, name="fake", wrong=(), version=1):
        self.name, self.fingerprint = name, {"fake": name, "version": version}
        self.answers = {math_prompt(it["question"]): it["gold"] for it in items}
        self.wrong, self.asked = set(wrong), []

    def complete(self, prompts, ev, stop=(), sample_indices=None):
        self.asked += prompts
        return [f"Step 1: it is so. The answer is: {int(self.answers[p]) + (p in self.wrong)}" for p in prompts]

    def close(self):
        pass


def _items(n, seed=3):
    return [{"id": p["id"], "question": p["question"], "gold": str(p["answer"])}
            for p in arith.generate_problems(n, seed=seed)]


def test_a_rerun_skips_done_items_and_a_larger_limit_continues(tmp_path):
    items, out = _items(10), tmp_path / "fake" / "arith.jsonl"
    model = FakeModel(items)
    rows, pending, _ = evaluate_benchmark(model, "arith", items[:6], out, EV, progress=False)
    assert len(rows) == 6 and pending == 0 and len(model.asked) == 6 and all(r["correct"] for r in rows)
    rows, _, _ = evaluate_benchmark(model, "arith", items[:6], out, EV, progress=False)
    assert len(model.asked) == 6 and len(rows) == 6  # nothing asked again
    rows, _, _ = evaluate_benchmark(model, "arith", items, out, EV, progress=False)
    assert len(model.asked) == 10 and [r["id"] for r in rows] == [it["id"] for it in items]
    assert len(list(read_jsonl(out))) == 10  # no id written twice
    row = rows[0]
    assert {"id", "response", "answer", "gold", "correct", "steps_ok"} <= set(row)


def test_a_meta_file_cut_short_makes_the_results_stale_not_a_traceback(tmp_path):
    """A kill or a full disk mid-write once left ``<benchmark>.meta.json`` empty, and every rerun failed on it:
    the results it described are moved aside and evaluated again, and the meta is written whole."""
    items, out = _items(3), tmp_path / "fake" / "arith.jsonl"
    evaluate_benchmark(FakeModel(items), "arith", items, out, EV, progress=False)
    out.with_suffix(".meta.json").write_text('{"model": ')  # cut short
    again = FakeModel(items)
    _, _, note = evaluate_benchmark(again, "arith", items, out, EV, progress=False)
    assert len(again.asked) == 3 and "moved to arith.stale.jsonl" in note
    assert json.loads(out.with_suffix(".meta.json").read_text())["model"]


def test_results_of_another_model_version_or_settings_are_moved_aside(tmp_path):
    items, out = _items(4), tmp_path / "fake" / "arith.jsonl"
    evaluate_benchmark(FakeModel(items), "arith", items, out, EV, progress=False)
    retrained = FakeModel(items, version=2)
    _, _, note = evaluate_benchmark(retrained, "arith", items, out, EV, progress=False)
    assert len(retrained.asked) == 4 and "model" in note and (out.parent / "arith.stale.jsonl").exists()
    longer = FakeModel(items, version=2)
    _, _, note = evaluate_benchmark(longer, "arith", items, out, dataclasses.replace(EV, max_new_tokens=64),
                                    progress=False)
    assert len(longer.asked) == 4 and "max_new_tokens" in note


def _gsm8k_file(tmp_path, items):
    """The arithmetic items in GSM8k's public format (question, answer ending '#### X')."""
    path = tmp_path / "gsm8k_test.jsonl"
    path.write_text("".join(json.dumps({"question": it["question"], "answer": f"Work.\n#### {it['gold']}"}) + "\n"
                            for it in items))
    return path


def test_gsm8k_format_file_from_settings_gives_strict_flexible_and_compat(tmp_path):
    from rleif_kit.worlds.benchmarks import load_items
    from rleif_kit.evaluation.scoring import summarize
    from rleif_kit.core.settings import parse_settings

    items = _items(4)
    settings = parse_settings({"eval": {"gsm8k_path": str(_gsm8k_file(tmp_path, items))}})
    loaded = load_items("gsm8k", settings=settings, limit=3)
    assert [it["gold"] for it in loaded] == [it["gold"] for it in items[:3]]

    class Loose(FakeModel):  # item 0 stated right, item 1 only as a last number, item 2 wrong
        def complete(self, prompts, ev, stop=(), sample_indices=None):
            golds = [int(self.answers[p]) for p in prompts]
            return [f"The answer is: {golds[0]}", f"so we get {golds[1]}", f"The answer is: {golds[2] + 1}"]

    rows, _, _ = evaluate_benchmark(Loose(loaded), "gsm8k", loaded, tmp_path / "m" / "gsm8k.jsonl", EV,
                                    progress=False)
    assert [r["correct"] for r in rows] == [True, False, False]
    assert [r["flexible_correct"] for r in rows] == [True, True, False]
    summary = summarize("gsm8k", rows)
    assert summary["accuracy"] == pytest.approx(1 / 3) and summary["flexible_accuracy"] == pytest.approx(2 / 3)
    assert summary["compat_accuracy"] == pytest.approx(1 / 3)


def test_a_missing_data_file_is_one_line_naming_the_settings_key(tmp_path):
    from rleif_kit.worlds.benchmarks import load_items
    from rleif_kit.core.settings import parse_settings

    settings = parse_settings({"eval": {"math_path": str(tmp_path / "nope.jsonl")}})
    with pytest.raises(FileNotFoundError, match=r"eval\.math_path = .*nope\.jsonl.*file not found") as err:
        load_items("math", settings=settings)
    assert "\n" not in str(err.value)


def test_humaneval_samples_pass_at_k_through_the_sandbox(tmp_path):
    from rleif_kit.worlds.benchmarks import load_items
    from rleif_kit.evaluation.scoring import summarize

    items = load_items("humaneval", limit=2)

    class Coder:
        name, fingerprint, chunk = "coder", {"coder": 1}, 8

        def complete(self, prompts, ev, stop=(), sample_indices=None):
            assert stop == () and all("Create a Python script for this problem:" in p for p in prompts)
            out = []
            for p, k in zip(prompts, sample_indices):
                item = next(it for it in items if wizardcoder_tabs(it["problem"]["prompt"]) in p)
                body = item["problem"]["canonical_solution"] if k == 0 or item is items[0] else "    return None\n"
                out.append(f"Here it is:\n```python\n{item['problem']['prompt']}{body}```\nDone.")
            return out

        def close(self):
            pass

    ev = dataclasses.replace(EV, n_samples=2, temperature=0.8)
    rows, _, _ = evaluate_benchmark(Coder(), "humaneval", items, tmp_path / "c" / "humaneval.jsonl", ev, progress=False)
    assert [r["id"] for r in rows] == [f"{items[0]['id']}#0", f"{items[0]['id']}#1", f"{items[1]['id']}#0",
                                       f"{items[1]['id']}#1"]
    assert [r["correct"] for r in rows] == [True, True, True, False] and rows[-1]["result"].startswith("failed")
    summary = summarize("humaneval", rows)
    assert summary["pass@1"] == pytest.approx((1 + 0.5) / 2) and "pass@10" not in summary


def _cfg(tmp_path, *extra):
    from rleif_kit.core.run_setup import setup

    return setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", "eval.limit=12", *extra), stage="06_eval",
                 report_dir=str(tmp_path / "reports"), workdir=str(ROOT))


def test_run_eval_summarises_and_compares_sft_with_ppo_on_shared_items(tmp_path):
    from rleif_kit.worlds.data import heldout_problems

    cfg, paths = _cfg(tmp_path)
    items = [{"id": p["id"], "question": p["question"], "gold": str(p["answer"])}
             for p in heldout_problems(cfg, paths)[:12]]
    sft = FakeModel(items, "sft", wrong=[math_prompt(it["question"]) for it in items[:6]])
    ppo = FakeModel(items, "ppo", wrong=[math_prompt(it["question"]) for it in items[:2]])
    result = run_eval(cfg, paths, sources=[("sft", lambda b: sft), ("ppo", lambda b: ppo)], progress=False)
    assert result.metric("accuracy") == {"sft": {"arith": 0.5}, "ppo": {"arith": pytest.approx(10 / 12)}}
    verdict = result.ab["arith"]
    assert verdict.numbers["n"] == 12 and verdict.numbers["gain"] == pytest.approx(4 / 12)
    saved = json.loads((paths.stage("06_eval") / "summary.json").read_text())
    assert saved["ab"]["arith"]["status"] == verdict.status and saved["summary"]["sft"]["arith"]["n"] == 12
    wrong = wrong_answers(paths, per_file=2)
    assert [(w["model"], w["benchmark"]) for w in wrong] == [("ppo", "arith")] * 2 + [("sft", "arith")] * 2


def test_missing_models_are_skipped_with_a_note_and_nothing_to_run_is_an_error(tmp_path):
    from rleif_kit.evaluation.stage import model_sources

    cfg, paths = _cfg(tmp_path)
    sources, notes = model_sources(cfg, paths)
    assert sources == [] and len(notes) == 2 and "run 03_sft first" in notes[0]
    with pytest.raises(FileNotFoundError, match="nothing to evaluate"):
        run_eval(cfg, paths, progress=False)


def test_n_samples_above_one_needs_a_temperature(tmp_path):
    from rleif_kit.core.config import ConfigError

    with pytest.raises(ConfigError, match=r"\[eval\] n_samples = 4: expected 1 when temperature = 0"):
        _cfg(tmp_path, "eval.n_samples=4")


def _answering_server_responder(solutions: dict, fail_once: set):
    """Reads the question out of the Alpaca prompt and answers it right; fails once for marked questions."""
    def respond(body):
        text = body["messages"][-1]["content"]
        question = re.search(r"### Instruction:\n(.*)\n\n### Response:", text, re.S).group(1)
        if question in fail_once:
            fail_once.discard(question)
            raise RuntimeError("flaky")
        return f"Step 1: done. The answer is: {solutions[question]}\nQuestion: another one"
    return respond


def test_served_model_through_the_endpoint_resumes_what_failed(tmp_path, monkeypatch):
    from rleif_kit.evaluation.generators import ServedModel
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from rleif_kit.core.settings import parse_settings

    monkeypatch.setenv("RLEIF_EVAL_KEY", "sk-eval-test")
    items = _items(6)
    solutions = {it["question"]: it["gold"] for it in items}
    with FakeOpenAIServer(responder=_answering_server_responder(solutions, {items[2]["question"]})) as server:
        settings = parse_settings({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_EVAL_KEY",
                                           "max_retries": 0}, "models": {"math_eval": "served-math"}})
        out = tmp_path / "served" / "arith.jsonl"
        rows, pending, _ = evaluate_benchmark(ServedModel(settings.endpoint("math_eval"), 4), "arith", items, out, EV,
                                              progress=False)
        assert pending == 1 and len(rows) == 5 and all(r["correct"] for r in rows)
        assert all(r["response"] == f"Step 1: done. The answer is: {r['gold']}\n" for r in rows)  # cut at "Question"
        rows, pending, _ = evaluate_benchmark(ServedModel(settings.endpoint("math_eval"), 4), "arith", items, out, EV,
                                              progress=False)
        chats = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert pending == 0 and len(rows) == 6 and len(chats) == 7  # 6 + the one retried
    # requests run concurrently, so the server may see them in any order: find item 0's
    body = next(c for c in chats if c["messages"][0]["content"] == math_prompt(items[0]["question"]))
    assert body["model"] == "served-math" and body["temperature"] == 0 and body["max_tokens"] == 32
    assert body["messages"] == [{"role": "user", "content": math_prompt(items[0]["question"])}]
    assert {c["messages"][0]["content"] for c in chats} == {math_prompt(i["question"]) for i in items}
    assert body["stop"] == ["Question", "USER", "ASSISTANT", "Instruction"]  # at most 4 go to the server


def test_cli_scores_samples_and_compares_two_result_directories(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    items = _items(8)
    data = _gsm8k_file(tmp_path, items)
    for name, wrong in (("a", 4), ("b", 1)):
        samples = tmp_path / f"{name}.jsonl"
        samples.write_text("".join(json.dumps({"id": f"gsm8k-{i:05d}", "response": f"The answer is: "
                                               f"{int(it['gold']) + (i < wrong)}"}) + "\n"
                                   for i, it in enumerate(items)))
        assert main(["eval", "gsm8k", "--samples", str(samples), "--data", str(data),
                     "--out", str(tmp_path / "res" / name)]) == 0
    printed = capsys.readouterr().out
    assert "gsm8k: n=8 accuracy 50.0% (strict); flexible 50.0%, compat 50.0%" in printed
    assert main(["eval", "compare", str(tmp_path / "res" / "a"), str(tmp_path / "res" / "b")]) == 0
    table = capsys.readouterr().out
    assert re.search(r"gsm8k\s+8\s+50\.0%\s+87\.5%\s+\+37\.5", table) and "3-point rule" in table
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "gold": "3"}) + "\n")
    assert main(["eval", "math", "--samples", str(bad)]) == 2
    assert f"{bad}:1: needs 'id', 'response' and 'gold'" in capsys.readouterr().err


def test_format_summary_names_every_scorer_and_a_code_benchmark_s_task_errors():
    from rleif_kit.evaluation.commands import format_summary

    gsm8k = {"n": 8, "accuracy": 0.5, "flexible_accuracy": 0.625, "compat_accuracy": 0.5,
             "math_verify_accuracy": 0.375, "math_verify_disagreements": 1}
    assert format_summary("gsm8k", gsm8k) == ("gsm8k: n=8 accuracy 50.0% (strict); flexible 62.5%, compat 50.0%, "
                                              "math-verify 37.5% (1 disagreement with strict)")
    mbpp = {"n": 500, "accuracy": 0.5, "pass@1": 0.5, "n_tasks": 500, "task_errors": 2}
    assert format_summary("mbpp", mbpp) == "mbpp: n=500 accuracy 50.0% (strict); pass@1 0.500, task errors 2"
    assert "task errors" not in format_summary("mbpp", {**mbpp, "task_errors": 0})


def test_cli_samples_write_math_verify_disagreements_beside_the_results(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    samples = tmp_path / "wizard.jsonl"  # math-verify reads "18 (3 * 6)" as 6, the kit's strict scorer as 18
    samples.write_text(json.dumps({"id": "q1", "response": "The answer is: 18 (3 * 6)", "gold": "18"}) + "\n"
                       + json.dumps({"id": "q2", "response": "The answer is: 7", "gold": "7"}) + "\n")
    out = tmp_path / "res"
    assert main(["eval", "gsm8k", "--samples", str(samples), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[-2] == ("gsm8k: n=2 accuracy 100.0% (strict); flexible 100.0%, compat 100.0%, "
                           "math-verify 50.0% (1 disagreement with strict)")
    disagreements = out / "gsm8k.math_verify_disagreements.jsonl"
    assert printed[-1] == f"per-item results: {out / 'gsm8k.jsonl'}; math-verify disagreements: {disagreements}"
    [line] = read_jsonl(disagreements)
    assert {k: line[k] for k in ("model", "benchmark", "id", "gold", "answer", "correct", "math_verify_answer",
                                 "math_verify_correct")} == {
        "model": "wizard", "benchmark": "gsm8k", "id": "q1", "gold": "18", "answer": "18", "correct": True,
        "math_verify_answer": "6", "math_verify_correct": False}


def test_cli_served_writes_the_disagreements_and_rechecks_rows_without_math_verify(tmp_path, capsys, monkeypatch):
    from rleif_kit.pipeline.cli import main
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("RLEIF_EVAL_KEY", "sk-eval-test")
    items = _items(3)
    data = _gsm8k_file(tmp_path, items)
    first = items[0]["question"]  # answered with its computation after it: strict reads the gold, math-verify not

    def respond(body):
        question = re.search(r"### Instruction:\n(.*)\n\n### Response:", body["messages"][-1]["content"], re.S)[1]
        gold = next(it["gold"] for it in items if it["question"] == question)
        return f"The answer is: {gold}" + (f" ({gold} * 1)" if question == first else "")

    out = tmp_path / "res"
    with FakeOpenAIServer(responder=respond) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_EVAL_KEY",
                                                "max_retries": 0}, "models": {"math_eval": "served-math"}}))
        argv = ["eval", "gsm8k", "--served", "--settings", str(settings), "--data", str(data), "--out", str(out)]
        assert main(argv) == 0
        results = out / "gsm8k.jsonl"  # --out is the folder itself
        printed = capsys.readouterr().out
        assert "math-verify 66.7% (1 disagreement with strict)" in printed  # 2 of 3
        assert f"math-verify disagreements: {out / 'gsm8k.math_verify_disagreements.jsonl'}" in printed
    assert [d["id"] for d in read_jsonl(results.with_suffix(".math_verify_disagreements.jsonl"))] == ["gsm8k-00000"]


def test_cli_a_missing_data_file_is_one_error_line(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    assert main(["eval", "gsm8k", "--model", str(tmp_path), "--data", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--data" in err and "file not found" in err


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_cli_backend_vllm_without_vllm_is_one_error_line(tmp_path, capsys):
    """`rleif eval BENCH --model PATH` honours --backend (the stage's [eval] backend has no say there)."""
    from rleif_kit.pipeline.cli import main

    data = _gsm8k_file(tmp_path, _items(2))
    assert main(["eval", "gsm8k", "--model", str(tmp_path), "--data", str(data), "--backend", "vllm"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--backend = 'vllm' needs the vllm package" in err and "pip install vllm" in err
    # with a run config, --backend overrides [eval] backend for the stage's local models
    run = tmp_path / "run"
    (run / "03_sft" / "model").mkdir(parents=True)
    (run / "03_sft" / "model" / "sft_info.json").write_text(json.dumps({"finetune": "full"}))
    argv = ["eval", str(TINY_PARAMS), "--backend", "vllm", "--set", 'eval.models=["sft"]']
    assert main([*argv, *(a for o in tiny_overrides(run) for a in ("--set", o))]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "[eval] backend = 'vllm' needs the vllm package" in err


@pytest.mark.slow
def test_local_model_generates_greedily_with_stops(tmp_path, small_model_dir):
    from rleif_kit.models.generation import generate
    from rleif_kit.core.text import cut_at_stop
    from rleif_kit.evaluation.generators import LocalModel

    items = _items(5)
    model = LocalModel(small_model_dir, "small", batch_size=5)
    ev = dataclasses.replace(EV, stop=["e", "1", "S"])  # letters a random-init model writes soon
    rows, pending, _ = evaluate_benchmark(model, "arith", items, tmp_path / "small" / "arith.jsonl", ev, progress=False)
    assert pending == 0 and len(rows) == 5
    full = generate(*model.load(), [math_prompt(it["question"]) for it in items], 32, batch_size=5, progress=False)
    # a stopped row ends where the unstopped one would be cut; the other rows are not disturbed
    assert [r["response"] for r in rows] == [cut_at_stop(text, ev.stop) for text in full]
    assert any(r["response"] != text for r, text in zip(rows, full))


@pytest.mark.slow
def test_notebook_runs_headless_on_the_tiny_preset(tmp_path, monkeypatch, small_model_dir):
    from rleif_kit.core.records import read_records
    from rleif_kit.pipeline.runner import run_pipeline

    monkeypatch.chdir(ROOT)
    run = tmp_path / "run"
    for stage, info in (("03_sft", "sft_info.json"), ("05_ppo", "ppo_info.json")):
        shutil.copytree(small_model_dir, run / stage / "model")
        (run / stage / "model" / info).write_text(json.dumps({"finetune": "full"}))
    run_pipeline(str(TINY_PARAMS), "06_eval", tiny_overrides(run, "eval.limit=16", "eval.max_new_tokens=24"),
                 report_dir=str(tmp_path / "reports"))
    rec = read_records(tmp_path / "reports" / "metrics.json")["06_eval"]
    assert rec["models"] == ["sft", "ppo"] and rec["n_items"] == {"sft": {"arith": 16}, "ppo": {"arith": 16}}
    assert rec["accuracy"]["sft"]["arith"] == rec["accuracy"]["ppo"]["arith"]  # the same weights, greedy
    assert rec["ab"]["arith"]["gain"] == 0 and rec["verdicts"] == {"sft_vs_ppo_arith": "fail"}
    assert (tmp_path / "reports" / "figures" / "06_eval_accuracy.png").exists()
    assert len(list(read_jsonl(run / "06_eval" / "ppo" / "arith.jsonl"))) == 16


def test_base_model_is_evaluated_from_base_model_name(tmp_path, small_model_dir):
    from rleif_kit.evaluation.stage import model_sources

    cfg, paths = _cfg(tmp_path, 'eval.models=["base", "sft"]', f'base.model_name="{small_model_dir}"')
    sources, notes = model_sources(cfg, paths)
    assert [label for label, _ in sources] == ["base"] and notes[0].startswith("sft: ")
    model = sources[0][1]("arith")
    assert model.path == small_model_dir and model.fingerprint["weights"]
