"""math-verify against the kit, case by case over the trap suite: every case where their verdicts differ is listed
below with its class, and every class has the kit's policy in docs/scoring.md. A new disagreement (a rule of the
kit changed, a trap case added, another math-verify) or one that went away fails here until the list, and the
policy text where a class is new, are updated. Also: math-verify's column in an evaluation, its timeouts in threads,
and the headline staying the kit's strict scorer. In-memory, no model, no network."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from test_math_traps import ALL, GSM8K_TRAPS, INCREASING, MATH_TRAPS, _flat

pytest.importorskip("math_verify")

from rleif_kit.worlds.math.answers import check_gsm8k, check_math  # noqa: E402
from rleif_kit.worlds.math.second_opinion import math_verify_check, math_verify_equal, version  # noqa: E402

POLICY = Path(__file__).parents[1] / "docs" / "scoring.md"
LETTERS = "Enter the letters of the correct options, separated by commas."

# (MATH prediction or GSM8k response, gold, question): the class of the disagreement (docs/scoring.md). MATH cases
# compare the two answers, each read as LaTeX math ($...$); GSM8k cases read the whole response, as an evaluation
# does.
EXPECTED = {
    ('\\frac{1 \\pm \\sqrt{5}}{2}', '\\frac{1+\\sqrt5}{2}, \\frac{1-\\sqrt5}{2}', ALL): 'lists and sets',
    ('-2, 6, 6', '-2, 6', ALL): 'lists and sets',
    ('6, -2', '-2, 6', INCREASING): 'order asked by the question',
    ('2, 1', '1, 2', 'Find a and b, respectively.'): 'order asked by the question',
    ('C, A, F', '\\text{A,C,F}', LETTERS): 'lists and sets',
    ('13, 12, 9, 7', '7,9,12,13', 'What are the four integers in increasing order?'): 'order asked by the question',
    ('(1,2)', '1, 2', None): 'points, intervals and lists',
    ('2 1/2', '\\frac52', None): 'mixed numbers',
    ('2½', '2.5', None): 'mixed numbers',
    ('3', '2\\frac{3}{2}', None): 'mixed numbers',
    ('1.5e3', '1500', None): 'scientific notation and scale words',
    ('2.5e-2', '\\frac{1}{40}', None): 'scientific notation and scale words',
    ('1.5 million', '1500000', None): 'scientific notation and scale words',
    ('3 thousand', '3000', None): 'scientific notation and scale words',
    ('2.5 billion', '2500000000', None): 'scientific notation and scale words',
    ('\\$1.5 \\text{ million}', '1500000', None): 'scientific notation and scale words',
    ('x+y=5', '5', None): 'equations',
    ('18-20', '-2', None): 'ranges, alternatives and hedges',
    ('18–20', '18', None): 'ranges, alternatives and hedges',
    ('1 - 2 i', '1-2i', None): 'complex numbers',
    ('5 \\text{ or more}', '5', None): 'ranges, alternatives and hedges',
    ('\\frac{3}{4} of the cake', '\\frac34', None): 'units and words',
    ('0.25', '25\\%', None): 'percent',
    ('3 ab', '3', None): 'units and words',
    ('12 in', '12', None): 'units and words',
    ('1.41421356', '\\sqrt{2}', None): 'a decimal for an irrational number',
    ('123_{6}', '123_{7}', None): 'base subscripts',
    ('1011_2', '1011_{3}', None): 'base subscripts',
    ('1.414213562373', '\\sqrt{2}', None): 'a decimal for an irrational number',
    ('3.14159265358979', '\\pi', None): 'a decimal for an irrational number',
    ('0.\\overline{3}', '\\frac{1}{3}', None): 'repeating decimals',
    ('0.1\\overline{6}', '\\frac16', None): 'repeating decimals',
    ('1.\\overline{27}', '\\frac{14}{11}', None): 'repeating decimals',
    ('-0.\\overline{142857}', '-\\frac17', None): 'repeating decimals',
    ('g(t) = 3t', '3', None): 'equations',
    ('f(x)+g(x)=5', '5', None): 'equations',
    ('\\begin{vmatrix}1&2\\\\3&4\\end{vmatrix}', '-2', None): 'determinants',
    ('2e', '5.43656365691809', None): 'a decimal for an irrational number',
    ('The answer is: 18 (3 * 6)', '18', None): 'GSM8k: the value and its computation',
    ('The answer is: 18 apples; 18 - 6 = 12 remain', '18', None): 'GSM8k: the value and its computation',
    ('The answer is: \\frac{1}{3} \\approx 0.33', '1/3', None): 'GSM8k: the value and its computation',
    ('The answer is: 2 1/2', '2.5', None): 'mixed numbers',
    ('The answer is: \\dfrac{3}{4}', '0.75', None): 'LaTeX outside $...$ on the answer line',
    ('The answer is: 10 and a half', '10.5', None): 'mixed numbers',
    ('The answer is: 10 and 1/2', '10.5', None): 'mixed numbers',
    ('The answer is: 1.5e3', '1500', None): 'scientific notation and scale words',
    ('The answer is: 1.5e3', '1.5', None): 'scientific notation and scale words',
    ('The answer is: 1.5 x 10^3', '1500', None): 'scientific notation and scale words',
    ('The answer is: 1.5 million', '1500000', None): 'scientific notation and scale words',
    ('The answer is: $1.5 million', '1.5', None): 'scientific notation and scale words',
    ('The answer is: 5 thousand dollars', '5000', None): 'scientific notation and scale words',
    ('The answer is: 1e-3', '0.001', None): 'scientific notation and scale words',
    ('The answer is: 18 to 20', '18', None): 'ranges, alternatives and hedges',
    ('The answer is: 18 or 20', '18', None): 'ranges, alternatives and hedges',
    ('The answer is: between 18 and 20', '18', None): 'ranges, alternatives and hedges',
    ('The answer is: 18–20 minutes', '18', None): 'ranges, alternatives and hedges',
    ('The answer is: 12 (or 13)', '12', None): 'ranges, alternatives and hedges',
    ('The answer is: 5 or more', '5', None): 'ranges, alternatives and hedges',
    ('The answer is: about 18', '18', None): 'ranges, alternatives and hedges',
    ('The answer is: 1\u202f000', '1000', None): 'GSM8k: the answer line read whole',
    ('The answer is: 7 hours and 30 minutes', '7', None): 'GSM8k: the answer line read whole',
    ('The answer is: 2 feet 6 inches', '2', None): 'GSM8k: the answer line read whole',
    ('The answer is: 3,5', '3.5', None): 'GSM8k: the answer line read whole',
    ('The answer is: 12 34', '12', None): 'GSM8k: the answer line read whole',
    ('The answer is: \\$1,000', '1000', None): 'LaTeX outside $...$ on the answer line',
}


def _disagreements() -> dict[tuple, bool]:
    """(case): the kit's verdict, for every trap case where math-verify's differs."""
    found = {}
    for _, pred, gold, question, equal, _ in _flat(MATH_TRAPS):
        if math_verify_equal(pred, gold) is not equal:
            found[pred, gold, question] = equal
    for _, response, gold, correct, _ in _flat(GSM8K_TRAPS):
        if math_verify_check(response, check_gsm8k(response, gold)["gold"])["math_verify_correct"] is not correct:
            found[response, gold, None] = correct
    return found


def test_the_disagreements_with_math_verify_are_the_listed_ones():
    assert version() == "0.9.0", "another math-verify: rerun this test and update EXPECTED and docs/scoring.md"
    found = _disagreements()
    new, gone = set(found) - set(EXPECTED), set(EXPECTED) - set(found)
    assert not new, f"new disagreements with math-verify: give each its class in EXPECTED (and docs/scoring.md): {new}"
    assert not gone, f"math-verify now agrees with the kit here: drop them from EXPECTED (and docs/scoring.md): {gone}"


def _documented_classes() -> dict[str, str]:
    text = POLICY.read_text(encoding="utf-8")
    section = text.split("## Where math-verify disagrees", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1:-1] for line in section.splitlines() if line.startswith("| ")]
    return {cells[0].strip(): cells[1].strip() for cells in rows[1:] if len(cells) >= 2}  # rows[0]: the header


def test_every_class_of_disagreement_has_its_policy_written_down():
    documented = _documented_classes()
    assert set(EXPECTED.values()) == set(documented), (
        "docs/scoring.md's table of disagreement classes must list exactly the classes in EXPECTED")
    assert all(len(policy) > 40 for policy in documented.values()), documented


def test_math_verify_reads_latex_outside_dollars_on_an_answer_line_otherwise():
    """The class "LaTeX outside $...$ on the answer line" in MATH: WizardMath's format writes the answer bare."""
    for line, gold in (("\\sqrt{8}", "2\\sqrt2"), ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt2}")):
        bare, dollars = f"So.\nThe answer is: {line}", f"So.\nThe answer is: ${line}$"
        assert check_math(bare, gold)["correct"] and check_math(dollars, gold)["correct"]
        assert math_verify_check(bare, gold)["math_verify_correct"] is False
        assert math_verify_check(dollars, gold)["math_verify_correct"] is True


# ------------------------------------------------------------------------------------------ running it safely

def test_math_verify_runs_in_a_thread_without_its_signal_timeouts():
    got = []
    worker = threading.Thread(target=lambda: got.append(math_verify_check("The answer is: $\\frac{1}{2}$", "0.5")))
    worker.start()
    worker.join(30)
    assert got and got[0]["math_verify_correct"] is True and got[0]["math_verify_answer"] == "1/2"


def test_a_slow_math_verify_is_cut_at_the_kit_s_limit(monkeypatch):
    import math_verify

    monkeypatch.setattr(math_verify, "parse", lambda *a, **k: time.sleep(5) or [])
    start = time.monotonic()
    assert math_verify_check("The answer is: 5", "5", timeout=0.3)["math_verify_correct"] is False
    assert time.monotonic() - start < 2


def test_without_math_verify_the_column_is_none(monkeypatch):
    import rleif_kit.worlds.math.second_opinion as second_opinion

    monkeypatch.setattr(second_opinion, "version", lambda: None)
    assert second_opinion.math_verify_check("The answer is: 5", "5") == {"math_verify_answer": None,
                                                                         "math_verify_correct": None}


# ------------------------------------------------------------------------------------------ in an evaluation

def test_every_math_row_and_summary_carries_the_second_opinion_beside_the_headline():
    from rleif_kit.evaluation.scoring import check_response, math_verify_disagreements, summarize

    items = [{"id": "a", "question": "q", "gold": "#### 50"}, {"id": "b", "question": "q", "gold": "#### 18"},
             {"id": "c", "question": "q", "gold": "#### 7"}]
    responses = ["The answer is: 50", "The answer is: 18 to 20", "The answer is: 8"]  # right, hedged, wrong
    rows = [check_response("gsm8k", it, r) for it, r in zip(items, responses)]
    assert [r["correct"] for r in rows] == [True, False, False]
    assert [r["math_verify_correct"] for r in rows] == [True, True, False]  # math-verify reads 18 from the range
    summary = summarize("gsm8k", rows)
    assert summary["accuracy"] == pytest.approx(1 / 3)  # the headline: the kit's strict scorer
    assert summary["math_verify_accuracy"] == pytest.approx(2 / 3) and summary["math_verify_disagreements"] == 1
    assert summary["scorers"] == {"strict": pytest.approx(1 / 3), "flexible": pytest.approx(1 / 3),
                                  "compat": pytest.approx(2 / 3), "math_verify": pytest.approx(2 / 3)}
    (line,) = math_verify_disagreements(rows, model="sft", benchmark="gsm8k")
    assert line["id"] == "b" and line["answer"] is None and line["math_verify_answer"] == "18"  # both readings
    math = check_response("math", {"id": "m", "question": "Find x.", "gold": "\\boxed{\\frac12}"}, "The answer is: 0.5")
    assert math["correct"] is True and math["math_verify_correct"] is True
    assert set(summarize("math", [math])["scorers"]) == {"strict", "compat", "math_verify"}


def test_stage_06_writes_the_disagreements(tmp_path):
    import json

    from conftest import ROOT, TINY_PARAMS, tiny_overrides
    from rleif_kit.core.jsonl import read_jsonl
    from rleif_kit.core.run_setup import setup
    from rleif_kit.core.settings import parse_settings
    from rleif_kit.evaluation.stage import run_eval

    golds = {"Add 2 and 3.": "5", "Add 10 and 8.": "18", "Add 1 and 6.": "7"}
    data = tmp_path / "gsm8k.jsonl"
    data.write_text("".join(json.dumps({"question": q, "answer": f"Work.\n#### {g}"}) + "\n" for q, g in golds.items()))
    settings = parse_settings({"eval": {"gsm8k_path": str(data)}})
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", 'eval.benchmarks=["gsm8k"]'),
                       stage="06_eval", report_dir=str(tmp_path / "reports"), workdir=str(ROOT))
    answers = {"Add 2 and 3.": "5", "Add 10 and 8.": "18 to 20", "Add 1 and 6.": "8"}  # right, hedged, wrong

    class Model:
        name, fingerprint, chunk = "m", {"m": 1}, 8

        def complete(self, prompts, ev, stop=(), sample_indices=None):
            return [f"Step 1: add.\nThe answer is: {next(a for q, a in answers.items() if q in p)}" for p in prompts]

        def close(self):
            pass

    run_eval(cfg, paths, settings, sources=[("sft", lambda b: Model())], progress=False)
    saved = json.loads(paths.eval_summary.read_text())
    figures = saved["summary"]["sft"]["gsm8k"]
    assert figures["accuracy"] == pytest.approx(1 / 3) and figures["math_verify_accuracy"] == pytest.approx(2 / 3)
    assert figures["scorers"]["strict"] == figures["accuracy"]  # the headline stays the strict scorer
    assert saved["math_verify"]["n"] == 1 and saved["math_verify"]["version"] == "0.9.0"
    assert paths.math_verify_disagreements.name == saved["math_verify"]["disagreements"]  # beside summary.json
    (line,) = read_jsonl(paths.math_verify_disagreements)
    assert (line["model"], line["benchmark"], line["answer"], line["math_verify_answer"]) == ("sft", "gsm8k", None, "18")
