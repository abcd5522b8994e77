"""The PRM toolkit without a run (issue 45): step-label formats, ProcessBench / PRMBench metrics, `rleif prm`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rleif_kit.pipeline.cli import main
from rleif_kit.rewards.prm_metrics import (evaluate_steps, first_wrong, predicted_first_wrong, prm_score,
                                           processbench)
from rleif_kit.rewards.prm_toolkit import read_scores, run_world, solution_text, training_examples
from rleif_kit.rewards.step_label_formats import (StepLabelError, detect_format, dry_run, format_dry_run,
                                                  read_step_labels)

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "prm_formats"


# ------------------------------------------------------------------------------------------------ formats

def test_each_fixture_is_detected_and_read():
    expected = {  # file -> (format, labels per row)
        "prm800k": [[True, False], [True, True, True], [True, True]],
        "math_shepherd": [[True, True, True], [False, False, False], [True, True, True]],
        "trl": [[True, True, True], [False, False, False], [True, False, False]],
        "kit": [[True, True], [False, False], [True, False]],
        "prm_data": [[True, True], [True, False, False], [True, True]],
        "processbench": [[True, True], [False, None, None], [True, False, None]],
    }
    for name, labels in expected.items():
        records = read_step_labels(DATA / f"{name}.jsonl")
        assert [r["labels"] for r in records] == labels, name
        assert {r["format"] for r in records} == {name}
        assert all(len(r["steps"]) == len(r["labels"]) and r["question"] and r["id"] for r in records)


def test_prm800k_follows_the_chosen_trajectory_to_the_error_found():
    first, second, _ = read_step_labels(DATA / "prm800k.jsonl")
    # chosen_completion null with found_error: the step taken is the completion rated -1, then the row ends
    assert first["steps"] == ["There are 4 * 6 = 24 eggs in the box.", "After two break, 24 + 2 = 26 eggs are left."]
    assert first["question"].startswith("A box holds") and first["id"] == "prm800k-1"
    # phase 1: the labeler's own step (human_completion) is right; a neutral 0 is right by default
    assert second["steps"][0] == "15 - 7 = 8." and second["labels"] == [True, True, True]
    assert read_step_labels(DATA / "prm800k.jsonl", neutral="wrong")[1]["labels"] == [True, False, True]
    assert read_step_labels(DATA / "prm800k.jsonl", neutral="skip")[1]["labels"] == [True, None, True]
    summary = dry_run(DATA / "prm800k.jsonl")  # the fourth row, a bad problem left before any step, is skipped
    assert (summary["rows"], summary["rows_skipped"], summary["rows_with_error"]) == (4, 1, 0)
    assert ", 1 skipped (left before any step)" in format_dry_run(summary)


def test_math_shepherd_splits_at_the_tag_and_reads_plus_minus():
    row = read_step_labels(DATA / "math_shepherd.jsonl")[1]
    assert row["question"] == "Sam has 3 bags with 5 apples each. He eats 2. How many apples remain?"
    assert row["steps"][0] == "Step 1: He starts with 3 + 5 = <<3+5=8>>8 apples." and row["class"] == "GSM8K"
    # the PRM reads it as the kit's step form, each "Step k:" written once
    assert solution_text(row).startswith("Step 1: He starts with 3 + 5 = <<3+5=8>>8 apples. Step 2: After eating")


def test_the_kit_row_keeps_its_solution_and_prm_data_reads_minus_one_zero_one():
    kit = read_step_labels(DATA / "kit.jsonl")[0]
    assert kit["solution"] == "Step 1: 7 * 2 = 14 Step 2: 12 + 14 = 26 The answer is: 26"
    assert solution_text(kit) == kit["solution"] and kit["id"] == "q1-s0"
    assert read_step_labels(DATA / "prm_data.jsonl")[2]["class"] == "division"
    assert detect_format({"a": 1}) is None


def _row(tmp_path: Path, name: str, rows: list) -> Path:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


GOOD_TRL = {"prompt": "q", "completions": ["a", "b"], "labels": [True, False]}
BAD_ROWS = [  # (format, a good first row, a malformed second row, the field the line names)
    ("trl", GOOD_TRL, {"prompt": "q", "completions": ["a", "b"], "labels": [True]}, "labels"),
    ("trl", GOOD_TRL, {"prompt": "q", "completions": ["a", 3], "labels": [True, True]}, "completions[1]"),
    ("trl", GOOD_TRL, {"prompt": "q", "completions": ["a"], "labels": ["yes"]}, "labels[0]"),
    ("trl", GOOD_TRL, {"prompt": [{"role": "user", "content": "q"}], "completions": ["a"], "labels": [True]}, "prompt"),
    ("math_shepherd", {"input": "Q\nStep 1: a ки", "label": "Q\nStep 1: a +"},
     {"input": "Q\nStep 1: a ки", "label": "Q\nStep 1: a ?"}, "label"),
    ("math_shepherd", {"input": "Q\nStep 1: a ки", "label": "Q\nStep 1: a +"}, {"input": "Q", "label": "Q"}, "input"),
    ("prm_data", {"question": "q", "steps": ["a"], "labels": [1]}, {"question": "q", "steps": ["a"], "labels": [2]},
     "labels[0]"),
    ("prm800k", {"question": {"problem": "p"}, "label": {"steps": [
        {"completions": [{"text": "a", "rating": 1}], "human_completion": None, "chosen_completion": 0}]}},
     {"question": {"problem": "p"}, "label": {"steps": [
         {"completions": [{"text": "a", "rating": 1}], "human_completion": None, "chosen_completion": 4}]}},
     "label.steps[0].chosen_completion"),
    ("prm800k", {"question": {"problem": "p"}, "label": {"steps": [
        {"completions": [{"text": "a", "rating": 1}], "human_completion": None, "chosen_completion": 0}]}},
     {"question": {"problem": 5}, "label": {"steps": []}}, "question.problem"),
    ("processbench", {"problem": "p", "steps": ["a"], "label": -1}, {"problem": "p", "steps": ["a"], "label": 3},
     "label"),
]


@pytest.mark.parametrize("fmt, good, bad, field", BAD_ROWS)
def test_a_malformed_row_is_one_line_naming_file_line_and_field(tmp_path, fmt, good, bad, field):
    path = _row(tmp_path, "data.jsonl", [good, bad])
    with pytest.raises(StepLabelError) as info:
        read_step_labels(path)
    message = str(info.value)
    assert message.startswith(f"{path}:2: field '{field}': ") and "\n" not in message
    summary = dry_run(path)  # the dry run counts it and goes on
    assert summary["format"] == fmt and summary["rows"] == 2 and summary["rows_with_error"] == 1
    assert summary["errors"] == [message]


def test_an_unknown_row_and_a_file_that_is_not_jsonl_are_one_line(tmp_path):
    with pytest.raises(StepLabelError, match=r"data.jsonl:1: no step-label format has these fields \(a, b\)"):
        read_step_labels(_row(tmp_path, "data.jsonl", [{"a": 1, "b": 2}]))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(GOOD_TRL) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl:2: invalid JSON"):
        read_step_labels(bad)
    with pytest.raises(ValueError, match="is a directory"):
        read_step_labels(tmp_path)


def test_dry_run_counts_and_shows_examples():
    summary = dry_run(DATA / "processbench.jsonl", examples=1)
    # 2 + 3 + 3 steps; labelled: 2 right, 1 wrong, then right, wrong = 5 labelled, 3 right
    assert (summary["rows"], summary["steps"], summary["labelled_steps"]) == (3, 8, 5)
    assert summary["right_share"] == pytest.approx(3 / 5) and summary["rows_with_error"] == 0
    text = format_dry_run(summary)
    assert "format processbench, 3 rows, 8 steps (5 labelled, 60.0% right), 0 row(s) with an error" in text
    assert "example pb-0: What is 6 * 7?" in text and "+ 6 * 7 = 42." in text


# ------------------------------------------------------------------------------------------------ metrics

LABELS = [[True, True, True], [True, False, False], [True, True, False]]
SCORES = [[0.9, 0.6, 0.8], [0.7, 0.3, 0.6], [0.4, 0.9, 0.1]]


def test_three_solutions_worked_on_paper():
    """Solutions A (all right), B (first wrong step 1), C (first wrong step 2), scored as SCORES.

    ProcessBench at 0.5: A has no score below 0.5 -> -1, right; B's first below is 0.3 at step 1, right; C's is 0.4
    at step 0, not step 2. Error accuracy 1/2, correct accuracy 1/1, F1 = 2 * 0.5 * 1 / 1.5 = 2/3.
    PRMBench at 0.5 over the 9 steps ("right" positive): A 3 TP; B TP, TN (0.3), FP (0.6); C FN (0.4), TP, TN (0.1):
    TP 5, FN 1, FP 1, TN 2. F1 right = 10 / 12 = 5/6, F1 wrong = 4 / 6 = 2/3, PRM-Score = (5/6 + 2/3) / 2 = 0.75.
    Swept: at 0.35 and 0.40 every step of C scores at least the threshold but its 0.1, so ProcessBench F1 = 1; the
    PRM-Score there: TP 6, FN 0, FP 1 (B's 0.6), TN 2: F1 right 12/13, F1 wrong 4/5, score (12/13 + 4/5) / 2. Both
    best thresholds tie at 0.35 and 0.40: the one nearer 0.5, 0.40, is named.
    """
    assert [first_wrong(x) for x in LABELS] == [-1, 1, 2]
    assert [predicted_first_wrong(s) for s in SCORES] == [-1, 1, 0]
    pb = processbench(LABELS, SCORES)
    assert (pb["error_accuracy"], pb["correct_accuracy"], pb["f1"]) == (0.5, 1.0, pytest.approx(2 / 3))
    rb = prm_score(LABELS, SCORES)
    assert rb["f1_right"] == pytest.approx(5 / 6) and rb["f1_wrong"] == pytest.approx(2 / 3)
    assert rb["prm_score"] == pytest.approx(0.75) and rb["steps"] == 9
    result = evaluate_steps([{"labels": x} for x in LABELS], SCORES)
    assert result["at_0.5"]["processbench"]["f1"] == pytest.approx(2 / 3)
    assert result["best"]["processbench_f1"] == {"threshold": 0.4, "f1": 1.0}
    assert result["best"]["prm_score"]["threshold"] == 0.4
    assert result["best"]["prm_score"]["prm_score"] == pytest.approx((12 / 13 + 4 / 5) / 2)
    assert len(result["sweep"]) == 19 and result["sweep"][0]["threshold"] == 0.05


def test_a_perfect_scorer_gives_one_and_constant_scorers_the_worked_values():
    """Constant 0.9: every step said right. ProcessBench predicts -1 everywhere: error accuracy 0, correct 1, F1 0.
    PRMBench: TP 6, FP 3 (the three wrong steps), no negatives said: F1 right = 12 / 15 = 0.8, F1 wrong = 0 / 3 = 0,
    PRM-Score 0.4. Constant 0.1: every step said wrong, so the first error is predicted at step 0, and none of
    A (-1), B (1), C (2) is 0, F1 0; PRMBench TN 3, FN 6: F1 right 0, F1 wrong = 6 / 12 = 0.5, PRM-Score 0.25."""
    perfect = [[1.0 if v else 0.0 for v in x] for x in LABELS]
    assert processbench(LABELS, perfect)["f1"] == 1.0 and prm_score(LABELS, perfect)["prm_score"] == 1.0
    high = [[0.9] * len(x) for x in LABELS]
    pb = processbench(LABELS, high)
    assert (pb["error_accuracy"], pb["correct_accuracy"], pb["f1"]) == (0.0, 1.0, 0.0)
    rb = prm_score(LABELS, high)
    assert (rb["f1_right"], rb["f1_wrong"], rb["prm_score"]) == (pytest.approx(0.8), 0.0, pytest.approx(0.4))
    low = [[0.1] * len(x) for x in LABELS]
    assert processbench(LABELS, low)["f1"] == 0.0
    rb = prm_score(LABELS, low)
    assert (rb["f1_right"], rb["f1_wrong"], rb["prm_score"]) == (0.0, 0.5, 0.25)


def test_unlabelled_steps_are_left_out_and_classes_broken_down():
    """ProcessBench's form: a None after the first error is no decision. Classes: x = A and B (both found at 0.5:
    F1 1), y = C alone (an error missed, no correct solution: F1 None). An unscored solution is counted apart."""
    labels = [[True, None], [False, None]]
    assert prm_score(labels, [[0.9, 0.0], [0.1, 1.0]])["steps"] == 2
    assert prm_score(labels, [[0.9, 0.0], [0.1, 1.0]])["prm_score"] == 1.0
    records = [{"labels": x, "class": c} for x, c in zip(LABELS + [[True]], ["x", "x", "y", "y"])]
    result = evaluate_steps(records, SCORES + [None])
    assert result["unscored"] == 1 and result["solutions"] == 3
    assert result["per_class"]["x"]["at_0.5"]["processbench"]["f1"] == 1.0
    assert result["per_class"]["y"]["at_0.5"]["processbench"]["f1"] is None
    with pytest.raises(ValueError, match="2 step scores for 3 labelled steps"):
        evaluate_steps([{"id": "a", "labels": [True] * 3}], [[0.5, 0.5]])


# ------------------------------------------------------------------------------------------------ rleif prm

def _example_files(tmp_path: Path) -> tuple[Path, Path]:
    data = _row(tmp_path, "steps.jsonl", [{"id": f"s{i}", "prompt": "q", "completions": ["x"] * len(x), "labels": x}
                                          for i, x in enumerate(LABELS)])
    scores = _row(tmp_path, "scores.jsonl", [{"id": f"s{i}", "step_scores": s} for i, s in enumerate(SCORES)])
    return data, scores


def test_rleif_prm_eval_from_a_scores_file(tmp_path, capsys):
    data, scores = _example_files(tmp_path)
    out = tmp_path / "metrics.json"
    assert main(["prm", "eval", "--data", str(data), "--scores", str(scores), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "ProcessBench F1" in printed and "0.667" in printed and "PRMBench PRM-Score" in printed
    result = json.loads(out.read_text())
    assert result["at_0.5"]["prmbench"]["prm_score"] == pytest.approx(0.75)
    assert result["best"]["processbench_f1"]["f1"] == 1.0 and result["scored_by"] == str(scores)


def test_rleif_prm_errors_are_one_line(tmp_path, capsys):
    data, scores = _example_files(tmp_path)
    short = _row(tmp_path, "short.jsonl", [{"id": "s0", "step_scores": [0.5]}])
    assert main(["prm", "eval", "--data", str(data), "--scores", str(short)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"rleif prm: error: {short}: no step scores for 2 of 3 solutions (first: 's1'): the ids must be " \
                  "the data's"
    bad = _row(tmp_path, "bad.jsonl", [{"id": "s0", "step_scores": ["high"]}])
    assert main(["prm", "eval", "--data", str(data), "--scores", str(bad)]) == 2
    assert capsys.readouterr().err.strip().startswith(f"rleif prm: error: {bad}:1: field 'step_scores': ")
    assert main(["prm", "eval", "--data", str(data)]) == 2
    assert "give a model (--model PATH) or a scores file" in capsys.readouterr().err
    assert main(["prm", "eval", "--data", str(DATA / "trl.jsonl"), "--dry-run"]) == 0
    assert "format trl, 3 rows, 9 steps" in capsys.readouterr().out
    assert main(["prm", "score", "--data", str(DATA / "math_shepherd.jsonl"), "--dry-run"]) == 0  # no model needed
    assert "format math_shepherd, 3 rows, 9 steps (9 labelled, 66.7% right)" in capsys.readouterr().out
    assert main(["prm", "score", "--data", str(data)]) == 2
    assert capsys.readouterr().err == "rleif prm: error: score needs --model (a PRM folder) and --out (the scores " \
                                      "file to write)\n"
    assert read_scores(scores)["s2"] == [0.4, 0.9, 0.1]


def test_rleif_prm_score_then_eval_with_a_tiny_prm(tmp_path, small_model_dir, capsys):
    """An untrained token-classification PRM on the tiny Llama, saved as the kit saves one: every step of each
    format gets a probability, and eval reads the scores file it wrote (the numbers are a random head's)."""
    from transformers import AutoModelForTokenClassification

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.rewards.reward import RM_INFO, head_kwargs

    prm = tmp_path / "run" / "04_reward_models" / "prm"
    AutoModelForTokenClassification.from_pretrained(str(small_model_dir), **head_kwargs("token")).save_pretrained(prm)
    load_tokenizer(str(small_model_dir)).save_pretrained(prm)
    (prm / RM_INFO).write_text(json.dumps({"head": "token", "finetune": "full", "base_model": "."}))
    for name in ("kit", "math_shepherd", "prm800k"):
        scores = tmp_path / f"{name}-scores.jsonl"
        assert main(["prm", "score", "--model", str(prm), "--data", str(DATA / f"{name}.jsonl"),
                     "--out", str(scores)]) == 0
        assert "3 solutions scored" in capsys.readouterr().out
        rows = [json.loads(line) for line in scores.read_text().splitlines()]
        records = read_step_labels(DATA / f"{name}.jsonl")
        assert [r["id"] for r in rows] == [r["id"] for r in records]
        assert all(len(r["step_scores"]) == len(x["labels"]) and all(0 <= s <= 1 for s in r["step_scores"])
                   for r, x in zip(rows, records))
        assert main(["prm", "eval", "--data", str(DATA / f"{name}.jsonl"), "--scores", str(scores)]) == 0
        assert "3 solutions scored" in capsys.readouterr().out
    out = tmp_path / "m.json"
    assert main(["prm", "eval", "--data", str(DATA / "kit.jsonl"), "--model", str(prm), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["unscored"] == 0
    capsys.readouterr()

    # inside a run's folder the PRM reads the run's world: a code world reads "Step k:" text as other steps
    (tmp_path / "run" / "config.resolved.toml").write_text('[base]\nworld = "tiny_code"\n')
    assert run_world(prm) == "tiny_code" and run_world(tmp_path) is None
    assert main(["prm", "eval", "--data", str(DATA / "trl.jsonl"), "--model", str(prm), "--out", str(out)]) == 0
    assert json.loads(out.read_text())["unscored"] == 3
    assert "3 solutions unscored: the PRM found other steps than are labelled, or they ran past --max-len; it read " \
           "them in the world 'tiny_code' (--world names" in capsys.readouterr().out
    assert main(["prm", "eval", "--data", str(DATA / "trl.jsonl"), "--model", str(prm), "--world", "arith",
                 "--out", str(out)]) == 0
    assert json.loads(out.read_text())["unscored"] == 0


def test_training_examples_keep_the_labelled_prefix():
    records = read_step_labels(DATA / "processbench.jsonl")
    examples, dropped = training_examples(records + [{**records[0], "labels": [None, None]}])
    assert dropped == 1 and [e["labels"] for e in examples] == [[True, True], [False], [True, False]]
    assert examples[1]["solution"] == "Step 1: 5 + 5 = 10." and examples[0]["source"] == "processbench"
    kit = read_step_labels(DATA / "kit.jsonl")
    assert training_examples(kit)[0][0]["solution"] == kit[0]["solution"]


def test_rleif_prm_train_then_score_and_eval(tmp_path, small_model_dir, capsys):
    """`rleif prm train` with the tiny preset's [reward_model] on a TRL file, then its folder scores and is judged."""
    rows = []
    for a in range(2, 10):
        for b in (3, 4, 5):
            right = [f"{a} + {b} = {a + b}", f"{a + b} * 2 = {2 * (a + b)} The answer is: {2 * (a + b)}"]
            c = a + b + 1  # a slip in step 1, carried on rightly
            wrong = [f"{a} + {b} = {c}", f"{c} * 2 = {2 * c} The answer is: {2 * c}"]
            q = f"What is ({a} + {b}) * 2?"
            rows += [{"prompt": q, "completions": right, "labels": [True, True]},
                     {"prompt": q, "completions": wrong, "labels": [False, True]}]
    data = _row(tmp_path, "train.jsonl", rows)
    out = tmp_path / "prm_run"
    assert main(["prm", "train", str(ROOT / "params" / "tiny-cpu.toml"), "--data", str(data), "--base",
                 str(small_model_dir), "--out", str(out), "--set", "reward_model.rm_epochs=1",
                 "--set", "base.report_to=[]"]) == 0
    printed = capsys.readouterr().out
    line = printed.splitlines()[-1]
    assert line.startswith("PRM trained on ") and " held out: held-out step accuracy " in line
    prm = out / "04_reward_models" / "prm"
    assert (prm / "rm_info.json").exists() and (out / "04_reward_models" / "prm_steps.jsonl").exists()
    assert main(["prm", "eval", "--data", str(data), "--model", str(prm)]) == 0
    assert f"{len(rows)} solutions scored" in capsys.readouterr().out


def test_rleif_prm_score_reads_the_generative_likelihood_head(tmp_path, small_model_dir):
    """The tiny Llama saved as a generative PRM (its calibration [1, 0]: P = sigmoid(lowest log-probability of what
    each step concludes) < 0.5): `rleif prm score` reads the head from rm_info.json and scores every step."""
    import shutil

    from rleif_kit.rewards.reward import RM_INFO

    prm = Path(shutil.copytree(small_model_dir, tmp_path / "likelihood"))
    (prm / RM_INFO).write_text(json.dumps({"head": "likelihood", "finetune": "full", "base_model": ".",
                                           "calibration": [1.0, 0.0]}))
    scores = tmp_path / "scores.jsonl"
    assert main(["prm", "score", "--model", str(prm), "--data", str(DATA / "prm_data.jsonl"), "--out",
                 str(scores)]) == 0
    rows = read_scores(scores)
    assert [len(s) for s in rows.values()] == [2, 3, 2]
    assert all(0 < x <= 0.5 for s in rows.values() for x in s)  # a log-probability is <= 0: sigmoid of it <= 0.5
