"""Building [sft].dataset from GSM8k/MATH training files: rule-based normalisation, and regeneration
through an OpenAI-compatible endpoint (loopback) keeping only answers equal to gold; resumable."""

from __future__ import annotations

import json

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.run_setup import setup
from rleif_kit.worlds.math.sft import build_sft_dataset

GSM8K = [
    {"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
                 "How many clips did Natalia sell altogether in April and May?",
     "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips "
               "altogether in April and May.\n#### 72"},
    {"question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. "
                 "How much did she earn?",
     "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = "
               "$<<0.2*50=10>>10.\n#### 10"},
]
MATH = [
    {"problem": "What is $1 + 1$?", "solution": "We add: $1 + 1 = 2$. So the answer is $\\boxed{2}$."},
    {"problem": "Compute $3 \\cdot 4$.", "solution": "1. Multiply: $3 \\cdot 4 = 12$.\n2. Done, it is $\\boxed{12}$."},
]


def _files(tmp_path):
    gsm, math = tmp_path / "gsm8k_train.jsonl", tmp_path / "math_train.jsonl"
    gsm.write_text("".join(json.dumps(r) + "\n" for r in GSM8K))
    math.write_text("".join(json.dumps(r) + "\n" for r in MATH))
    return gsm, math


def _cfg(tmp_path, *extra):
    gsm, math = _files(tmp_path)
    return setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", f'sft.dataset="{tmp_path}/stepwise.jsonl"',
                                                  f'sft.gsm8k_train="{gsm}"', f'sft.math_train="{math}"', *extra),
                 stage="02_dedup", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))


def test_normalise_builds_the_dataset_and_reports_what_it_dropped(tmp_path):
    cfg, _ = _cfg(tmp_path, 'sft.build="normalise"')
    report = build_sft_dataset(cfg)
    rows = list(read_jsonl(tmp_path / "stepwise.jsonl"))
    # 2 GSM8k (structured) + 1 MATH numbered list kept; the one-paragraph MATH solution is set aside
    assert report["problems"] == 4 and report["kept"] == 3 and report["dropped"] == {"no step structure": 1}
    natalia = next(r for r in rows if r["instruction"].startswith("Natalia"))
    assert natalia["response"] == ("Step 1: Natalia sold 48/2 = 24 clips in May. Step 2: Natalia sold 48+24 = 72 "
                                   "clips altogether in April and May. The answer is: 72")


def test_regenerate_keeps_only_answers_equal_to_gold_and_resumes(tmp_path, monkeypatch):
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from rleif_kit.core.settings import load_settings

    def solver(body):  # right for GSM8k, wrong for MATH
        q = body["messages"][-1]["content"].rsplit("Problem:", 1)[1]
        if "Natalia" in q:
            return "Step 1: 48 / 2 = 24. Step 2: 48 + 24 = 72. The answer is: 72"
        if "Weng" in q:
            return "1. 12 / 60 = 0.2 per minute.\n2. 0.2 * 50 = 10.\nThe answer is: $10"
        return "Step 1: I guess. The answer is: 99"

    monkeypatch.setenv("RLEIF_BUILD_KEY", "sk-build-0123456789")
    with FakeOpenAIServer(responder=solver) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_BUILD_KEY",
                                                "max_retries": 0}, "models": {"evolve": "solver"}}))
        cfg, _ = _cfg(tmp_path, 'sft.build="regenerate"', "evol_instruct.cache=false")
        report = build_sft_dataset(cfg, load_settings(settings))
        sent = len(server.requests)
        again = build_sft_dataset(cfg, load_settings(settings))
        assert len(server.requests) == sent == 4  # the rerun sent nothing: every id was already decided
    assert report["kept"] == 2 and report["dropped"] == {"final answer differs from gold": 2}
    assert again == report
    weng = next(r for r in read_jsonl(tmp_path / "stepwise.jsonl") if r["instruction"].startswith("Weng"))
    assert weng["response"] == "Step 1: 12 / 60 = 0.2 per minute. Step 2: 0.2 * 50 = 10. The answer is: 10"


def test_a_regenerated_solution_cut_off_at_max_tokens_is_dropped_with_its_reason(tmp_path, monkeypatch):
    """Issue 17: a reply stopped at max_tokens ("The answer is: 8" of 86) must not become SFT data."""
    from rleif_kit.core.settings import load_settings
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv("RLEIF_BUILD_KEY", "sk-build-0123456789")
    with FakeOpenAIServer(responder=lambda body: "Step 1: 48 / 2 = 24. Step 2: 48 + 24 = 72. The answer is: 72") \
            as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_BUILD_KEY",
                                                "max_retries": 0}, "models": {"evolve": "solver"}}))
        cfg, _ = _cfg(tmp_path, 'sft.build="regenerate"', "evol_instruct.cache=false",
                      "evol_instruct.max_new_tokens=16")  # the reply has 17 words: cut before its last one
        report = build_sft_dataset(cfg, load_settings(settings))
    assert report["kept"] == 0
    assert report["dropped"] == {"cut off at max_tokens = 16 (finish_reason length): raise [evol_instruct] "
                                 "max_new_tokens": 4}


def test_answers_without_steps_are_rewritten_through_the_endpoint(tmp_path, monkeypatch):
    from rleif_kit.testing.fake_openai import FakeOpenAIServer
    from rleif_kit.core.settings import load_settings
    from rleif_kit.dedup.sft_data import evolved_rows

    def rewriter(body):
        text = body["messages"][-1]["content"]
        if "Anna" in text:
            return "Step 1: 3 + 4 = 7 apples. The answer is: 7"
        return "Step 1: 2 + 2 = 5. The answer is: 5"  # changes the result: must be rejected

    monkeypatch.setenv("RLEIF_BUILD_KEY", "sk-build-0123456789")
    evolved = [{"id": "a", "round": 1, "text": "Anna has 3 apples and gets 4. How many?",
                "answer": "She ends up with seven apples, since three and four make seven. The answer is: 7"},
               {"id": "b", "round": 1, "text": "Ben has 2 pens and gets 2. How many?",
                "answer": "Two and two make four pens. The answer is: 4"},
               {"id": "c", "round": 1, "text": "Cat has 1 cup.", "answer": "Step 1: 1 + 1 = 2. The answer is: 2"}]
    with FakeOpenAIServer(responder=rewriter) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": "RLEIF_BUILD_KEY",
                                                "max_retries": 0}, "models": {"evolve": "m"}}))
        cfg, _ = _cfg(tmp_path, 'evol_instruct.backend="openai"', "evol_instruct.cache=false")
        rows, rejected = evolved_rows(cfg, evolved, load_settings(settings))
    assert {r["id"]: r["response"] for r in rows} == {"c": "Step 1: 1 + 1 = 2. The answer is: 2",
                                                       "a": "Step 1: 3 + 4 = 7 apples. The answer is: 7"}
    assert rejected == [{"id": "b", "reason": "rewrite failed"}]
