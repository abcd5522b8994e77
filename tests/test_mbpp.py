"""WizardCoder's code formats, exactly: HumanEval's tab-converted prompt, MBPP and MBPP+ prompts, post-processing,
id resolution, scoring through the sandbox (unforgeable verdicts), the CLI's --samples mode on WizardCoder's raw
generation format, and generation on the tiny model. The MBPP fixtures in tests/data are written for the kit."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from rleif_kit.core.config import EvalConfig
from rleif_kit.worlds.code.postprocess import extract_code, extract_mbpp, extract_mbppplus
from rleif_kit.evaluation.scoring import check_code, summarize
from rleif_kit.evaluation.stage import evaluate_benchmark, stop_for
from rleif_kit.worlds.code import mbpp
from rleif_kit.worlds.benchmarks import load_items, prompt_for
from rleif_kit.worlds.prompts import code_prompt

DATA = Path(__file__).parent / "data"
MBPP_FILE, PLUS_FILE = DATA / "mbpp_tasks.jsonl", DATA / "mbppplus_tasks.jsonl"
HEADER = "Below is an instruction that describes a task. Write a response that appropriately completes the request."


# ------------------------------------------------------------------------------------------ prompts, by hand

def test_humaneval_prompt_is_wizardcoders_tab_converted_format():
    problems = {it["id"]: it["problem"] for it in load_items("humaneval", limit=3)}
    assert code_prompt(problems["HumanEval/2"]["prompt"]) == (
        HEADER + "\n\n### Instruction:\nCreate a Python script for this problem:\n"
        "\n\ndef truncate_number(number: float) -> float:\n"
        "\t\"\"\" Given a positive floating point number, it can be decomposed into\n"
        "\tand integer part (largest integer smaller than given number) and decimals\n"
        "\t(leftover part always smaller than 1).\n\n"
        "\tReturn the decimal part of the number.\n"
        "\t>>> truncate_number(3.5)\n"
        "\t0.5\n"
        "\t\"\"\"\n"
        "\n\n### Response:")
    assert code_prompt(problems["HumanEval/0"]["prompt"], "wizardcoder-080166c") == (
        HEADER + "\n\n\n### Instruction:\nCreate a Python script for this problem:\n"
        "from typing import List\n\n\n"
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "\t\"\"\" Check if in given list of numbers, are any two numbers closer to each other than\n"
        "\tgiven threshold.\n"
        "\t>>> has_close_elements([1.0, 2.0, 3.0], 0.5)\n"
        "\tFalse\n"
        "\t>>> has_close_elements([1.0, 2.8, 3.0, 4.0, 5.0, 2.0], 0.3)\n"
        "\tTrue\n"
        "\t\"\"\"\n"
        "\n\n### Response:")
    assert all("    " not in code_prompt(p["prompt"]) for p in problems.values())
    with pytest.raises(ValueError, match="unknown code prompt version"):
        code_prompt("x", "wizardcoder-2099")


def test_mbpp_prompt_is_mbpp_gen_format():
    item = next(it for it in load_items("mbpp", data=str(MBPP_FILE)) if it["id"] == "11")
    assert prompt_for("mbpp", item, None) == (
        HEADER + "\n\n### Instruction:\nCreate a Python script for this problem:\n"
        "\nWrite a python function to remove first and last occurrence of a given character from the string.\n"
        "Test examples:\n"
        "assert remove_Occ(\"hello\",\"l\") == \"heo\"\n"
        "assert remove_Occ(\"abcda\",\"a\") == \"bcd\"\n"
        "assert remove_Occ(\"PHP\",\"P\") == \"H\"\n"
        "\n### Response:")
    record = {"task_id": 493, "text": "Write a function    to draw hexagons.", "test_list": ["assert long(1) == [[...]]"]}
    assert mbpp.mbpp_prompt(record).endswith(":\n\nWrite a function\tto draw hexagons.\nTest examples:\n"
                                             "calculate_polygons(startx, starty, endx, endy, radius)\n\n### Response:")


def test_mbppplus_prompt_is_the_evalplus_style_format():
    item = next(it for it in load_items("mbppplus", data=str(PLUS_FILE)) if it["id"] == "Mbpp/11")
    assert prompt_for("mbppplus", item, None) == (
        HEADER + "\n\n\n### Instruction:\n"
        "Write a python function to remove first and last occurrence of a given character from the string. "
        "Your code should satisfy the following assertion:\n```python\n"
        "assert remove_Occ(\"hello\",\"l\") == \"heo\"\n```\n\n### Response:")
    # without an EvalPlus prompt: the task text and its first test
    plain = mbpp.mbppplus_prompt({"task_id": 2, "text": "Add two numbers.", "test_list": ["assert add(1, 2) == 3"]})
    assert plain.endswith("### Instruction:\nAdd two numbers. Your code should satisfy the following assertion:\n"
                          "```python\nassert add(1, 2) == 3\n```\n\n### Response:")


def test_code_stops_at_eos_only_and_math_stop_lists_are_named():
    ev = EvalConfig()
    assert stop_for("mbpp", ev) == stop_for("humaneval", ev) == ()
    assert "Question" in stop_for("gsm8k", ev)
    assert stop_for("math", dataclasses.replace(ev, stop_list="wizardmath-01f17bf")) == (
        "Instruction:", "Instruction", "Response:", "Response")
    assert stop_for("math", dataclasses.replace(ev, stop=["END"])) == ("END",)
    bad = dataclasses.replace(ev, stop_list="wizardmath-latest", compat_math="loose")
    assert {k for k, _ in bad.problems()} == {"stop_list", "compat_math"}


# ------------------------------------------------------------------------------------------ post-processing

def test_post_processing_follows_each_script():
    raw = ("Sure!\n```python\ndef f(x):\n\treturn x + 1\n\nassert f(1) == 2\n```\n\n"
           "if __name__ == \"__main__\":\n\tprint(f(2))")
    assert extract_mbpp(raw) == "def f(x):\n    return x + 1\n\nassert f(1) == 2"       # tabs back to spaces
    assert extract_mbppplus(raw) == "def f(x):\n    return x + 1"                        # ... and cut at assert
    assert extract_code(raw) == "def f(x):\n    return x + 1\n\nassert f(1) == 2"
    assert extract_mbpp("def g():\n    pass\n# Test examples\nprint(g())") == "def g():\n    pass"
    assert extract_mbpp("def g():\n    pass\n# Example usage\ng()") == "def g():\n    pass"
    assert extract_mbppplus("def g():\r\n    pass\r\n") == "def g():\n    pass\n"
    assert extract_mbpp("x = '```'\n```python\ny = 1\n```") == "y = 1"


# ------------------------------------------------------------------------------------------ data and ids

@pytest.mark.parametrize("raw,number", [(11, 11), ("11", 11), ("Mbpp/11", 11), ("MBPP/11", 11), (" 7 ", 7),
                                        ("HumanEval/1", None), (True, None), ("11a", None)])
def test_task_number(raw, number):
    assert mbpp.task_number(raw) == number


def test_tests_become_a_check_with_the_candidate_and_the_setup_code():
    task = next(t for t in mbpp.load_tasks("mbpp", MBPP_FILE) if t["task_id"] == 14)
    assert mbpp.problem(task, "mbpp") == {
        "task_id": "14", "prompt": "", "entry_point": "add_offset",
        "test": "OFFSET = 7\n\n\ndef check(candidate):\n    assert candidate(1) == 1 + OFFSET\n"
                "    assert candidate(-7) == 0\n    assert candidate(3) == 10\n"}
    sphere = next(t for t in mbpp.load_tasks("mbpp", MBPP_FILE) if t["task_id"] == 13)
    assert mbpp.problem(sphere, "mbpp")["test"].startswith("import math\n")  # the module its asserts use


def test_bad_mbpp_files_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"task_id": 11, "text": "x"}) + "\n")
    assert load_items("mbpp", data=str(bad))[0]["problem"]["error"] == (  # one bad task: an error row, not the end
        "task 11: needs 'test_list', a list of assert lines")
    prompts_only = tmp_path / "mbppplus.json"
    prompts_only.write_text(json.dumps({"Mbpp/2": "Write a function. Your code should satisfy ..."}))
    with pytest.raises(mbpp.MbppDataError, match="holds prompts only"):
        load_items("mbppplus", data=str(prompts_only))
    full = tmp_path / "mbpp_full.jsonl"
    full.write_text("".join(json.dumps({"task_id": i, "text": f"t{i}", "test_list": [f"assert f({i}) == {i}"]}) + "\n"
                            for i in range(1, 975)))
    ids = [it["id"] for it in load_items("mbpp", data=str(full))]
    assert ids[0] == "11" and ids[-1] == "510" and len(ids) == 500  # the test split of the full file


# ------------------------------------------------------------------------------------------ scoring

def _raw_generation_file(path: Path, task_ids, tasks):
    """WizardCoder's mbpp_gen.py output: task_id, the raw text after "### Response:" (tabs already spaces) as
    ``completion``, and ``all_code``; one right and one wrong sample per task."""
    with path.open("w") as f:
        for tid, task in zip(task_ids, tasks):
            right = f" Here is the code:\n```python\n{task['code']}\n```\n\n# Example usage\nprint('hi')"
            f.write(json.dumps({"task_id": tid, "completion": right, "all_code": "..." + right}) + "\n")
            f.write(json.dumps({"task_id": tid, "completion": "```python\ndef nothing():\n    pass\n```",
                                "all_code": "..."}) + "\n")


@pytest.mark.parametrize("variant,data,ids", [
    ("mbpp", MBPP_FILE, (11, 12, 13, 14)), ("mbpp", MBPP_FILE, ("11", "Mbpp/12", 13, "14")),
    ("mbppplus", PLUS_FILE, ("Mbpp/11", "Mbpp/12", "Mbpp/13")), ("mbppplus", PLUS_FILE, (11, "12", "Mbpp/13")),
])
def test_cli_scores_wizardcoders_raw_generation_files(tmp_path, capsys, variant, data, ids):
    from rleif_kit.pipeline.cli import main

    tasks = mbpp.load_tasks(variant, data)
    samples = tmp_path / "samples.jsonl"
    _raw_generation_file(samples, ids, tasks)
    out = tmp_path / "scored"
    assert main(["eval", variant, "--samples", str(samples), "--data", str(data), "--out", str(out)]) == 0
    assert "pass@1 0.500" in capsys.readouterr().out
    rows = [json.loads(line) for line in (out / f"{variant}.jsonl").read_text().splitlines()]
    assert [r["correct"] for r in rows] == [True, False] * len(tasks)
    assert {r["task_id"] for r in rows} == {mbpp.task_id_for(variant, t["task_id"]) for t in tasks}
    assert all("Example usage" not in r["completion"] for r in rows)


def test_unknown_task_in_samples_is_one_line(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": 99, "completion": "x = 1"}) + "\n")
    assert main(["eval", "mbpp", "--samples", str(samples), "--data", str(MBPP_FILE)]) == 2
    assert "s.jsonl:1: needs a known 'task_id' of the mbpp data" in capsys.readouterr().err


FORGERIES = {
    "prints the pass marker and exits": "import sys\nprint('passed')\nsys.exit(0)",
    "an answer equal to everything": "class A:\n    def __eq__(self, o):\n        return True\n"
                                     "def remove_Occ(s, c):\n    return A()\n"
                                     "def shared(a, b):\n    return A()\n"
                                     "def volume_sphere(r):\n    return A()\n",
    "rewrites builtins": "import builtins\nbuiltins.set = lambda *a: 1\nbuiltins.AssertionError = Exception\n"
                         "def shared(a, b):\n    return []\n",
    "kills the process after patching isclose": "import math\nmath.isclose = lambda *a, **k: True\n"
                                                "def volume_sphere(r):\n    return 0\n",
}


@pytest.mark.parametrize("name", FORGERIES)
def test_forged_verdicts_fail(name):
    items = load_items("mbpp", data=str(MBPP_FILE))[:3]
    samples = [{"task_id": it["id"], "completion": FORGERIES[name]} for it in items]
    rows = check_code(samples, {it["id"]: it["problem"] for it in items}, benchmark="mbpp")
    assert not any(r["correct"] for r in rows), [(r["task_id"], r["result"]) for r in rows]


# ------------------------------------------------------------------------------------------ the tiny model

def test_tiny_model_generates_and_is_scored_on_mbpp_fixtures(tmp_path, small_model_dir):
    from rleif_kit.evaluation.generators import LocalModel

    class Recording(LocalModel):
        def complete(self, prompts, ev, stop=(), sample_indices=None):
            self.prompts = list(prompts)
            return super().complete(prompts, ev, stop, sample_indices)

    ev = dataclasses.replace(EvalConfig(), max_new_tokens=16, code_timeout=10.0)
    for variant, data in (("mbpp", MBPP_FILE), ("mbppplus", PLUS_FILE)):
        items = load_items(variant, data=str(data))
        model = Recording(small_model_dir, "small", batch_size=4)
        rows, pending, _ = evaluate_benchmark(model, variant, items, tmp_path / variant / "out.jsonl", ev,
                                              progress=False)
        assert pending == 0 and [r["id"] for r in rows] == [f"{it['id']}#0" for it in items]
        assert model.prompts == [it["prompt"] for it in items]  # the variant's exact prompt went in
        assert all(r["result"] and r["judged"] in ("value", "test", "value-unprotected", "test-unprotected")
                   for r in rows)
        summary = summarize(variant, rows)
        assert summary["n_tasks"] == len(items) and summary["pass@1"] == sum(r["correct"] for r in rows) / len(items)


# ------------------------------------------------------------------------------------------ what real MBPP code returns

def _tasks(tmp_path, rows):
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {it["id"]: it["problem"] for it in load_items("mbpp", data=str(path))}


@pytest.mark.parametrize("code,passed", [
    ("import collections\ndef freq(xs):\n    return collections.Counter(xs)", True),   # MBPP 88's own solution
    ("import collections\ndef freq(xs):\n    return collections.OrderedDict(collections.Counter(xs))", True),
    ("def freq(xs):\n    return (x for x in xs)", False),  # a generator never equals a dict, as in the harness
])
def test_containers_of_collections_cross_as_the_test_compares_them(tmp_path, code, passed):
    problems = _tasks(tmp_path, [{"task_id": 88, "text": "Count the items.", "test_list": [
        "assert freq([1, 1, 2]) == {1: 2, 2: 1}", "assert freq([]) == {}", "assert freq([3]) == ({3: 1})"]}])
    rows = check_code([{"task_id": "88", "completion": code}], problems, benchmark="mbpp")
    assert rows[0]["correct"] is passed, rows[0]["result"]


def test_an_iterator_behind_set_and_an_entry_point_named_check(tmp_path):
    problems = _tasks(tmp_path, [
        {"task_id": 56, "text": "Check a number.", "test_list": ["assert check(70) == False", "assert check(23) == False",
                                                                   "assert set(check([1])) == {1}"]},
        {"task_id": 57, "text": "Keep the evens.", "test_list": ["assert set(evens([1, 2, 4])) == {2, 4}"]}])
    samples = [{"task_id": "56", "completion": "def check(n):\n    return n if isinstance(n, list) else False"},
               {"task_id": "57", "completion": "def evens(xs):\n    return filter(lambda x: x % 2 == 0, xs)"}]
    rows = check_code(samples, problems, benchmark="mbpp")
    assert [r["correct"] for r in rows] == [True, True], [r["result"] for r in rows]


def test_samples_of_plain_code_are_not_cut_again(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    code = ("def remove_Occ(s, ch):\n    i = s.find(ch)\n    if i >= 0:\n        s = s[:i] + s[i + 1:]\n"
            "    j = s.rfind(ch)\n    assert j < len(s)\n    if j >= 0:\n        s = s[:j] + s[j + 1:]\n    return s")
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"task_id": "Mbpp/11", "completion": code}) + "\n")
    assert main(["eval", "mbppplus", "--samples", str(samples), "--data", str(PLUS_FILE), "--out", str(tmp_path)]) == 0
    row = json.loads((tmp_path / "mbppplus.jsonl").read_text())
    assert row["completion"] == code and row["correct"] is True  # the assert inside the function is kept


def test_an_evalplus_prompt_without_its_assert_still_makes_the_prompt():
    record = {"task_id": "Mbpp/2", "prompt": "Write a function to add two numbers.", "test_list": ["assert add(1, 2) == 3"]}
    assert mbpp.mbppplus_input(record) == ("Write a function to add two numbers. Your code should satisfy the following "
                                           "assertion:\n```python\nassert add(1, 2) == 3\n```")


def test_only_the_text_after_the_last_response_header_is_kept():
    raw = "```python\ndef a():\n    pass\n```\n### Instruction:\nmore\n### Response:\n```python\ndef b():\n    pass\n```"
    assert extract_mbpp(raw) == "def b():\n    pass" and extract_code(raw) == "def b():\n    pass"
