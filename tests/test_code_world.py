"""The code world's training side (issue 28): WizardCoder's training prompt and target, the answer template and
extraction, the step split a code PRM uses, rV on hand-made programs (right, wrong, crashing, hanging, hostile),
the test check of evolved tasks, the counterfactual edits, and parallel sandbox scoring. In-process and the
sandbox only: no model, no network."""

from __future__ import annotations

import threading

import pytest

from test_humaneval_hostile import FORGERIES, TRICKS, forgeries
from rleif_kit.core.config import load_config
from rleif_kit.worlds import get_world
from rleif_kit.worlds.base import AnswerRejected
from rleif_kit.worlds.code.edits import CODE_EDITS
from rleif_kit.worlds.code.steps import CODE_STEPS
from rleif_kit.worlds.code.verifier import vet_reference

CODE = get_world("code")
TINY = get_world("tiny_code")
ADD = {"id": "t1", "text": "Write a Python function f(a, b) that returns a plus b.",
       "problem": {"entry_point": "f", "tests": ["assert f(2, 3) == 5", "assert f(4, 4) == 8", "assert f(10, -3) == 7",
                                                 "assert f(0, 6) == 6"]}}


def block(body: str, head: str = "def f(a, b):\n") -> str:
    return f"```python\n{head}{body}```"


# ------------------------------------------------------------------------------ prompts


def test_training_prompt_and_target_are_train_wizardcoders():
    no_input = CODE.train_prompt("Reverse a list.")
    assert no_input == ("Below is an instruction that describes a task. Write a response that appropriately completes "
                        "the request.\n\n### Instruction:\nReverse a list.\n\n### Response:")
    with_input = CODE.train_prompt("Reverse it.", input="[1, 2, 3]")
    assert with_input == ("Below is an instruction that describes a task, paired with an input that provides further "
                          "context. Write a response that appropriately completes the request.\n\n### Instruction:\n"
                          "Reverse it.\n\n### Input:\n[1, 2, 3]\n\n### Response:")
    assert CODE.train_prompt("Reverse a list.", cot=True) == no_input  # no chain-of-thought opener for code
    assert CODE.completion("```python\nx = 1\n```") == "```python\nx = 1\n```"  # the output itself, EOS by the trainer
    assert CODE.prompt_for({"text": "Reverse it.", "input": "[1, 2, 3]"}) == with_input


def test_sft_examples_keep_the_input_and_the_consistency_check_reads_it(tmp_path):
    from rleif_kit.checks.verdicts import check_prompt_consistency

    rows = [{"prompt": CODE.train_prompt("Reverse it.", input="[1, 2]"), "instruction": "Reverse it.",
             "input": "[1, 2]"}, {"prompt": CODE.train_prompt("Sort it."), "instruction": "Sort it."}]
    assert check_prompt_consistency(rows, eval_cot=False, world=CODE).status == "ok"
    dropped = [{**rows[0], "input": ""}]  # trained without the input the prompt shows
    assert check_prompt_consistency(dropped, eval_cot=False, world=CODE).status == "fail"


def test_the_published_recipe_evaluates_under_humanevals_own_prompt_and_the_tiny_world_under_one():
    from rleif_kit.checks.verdicts import known_prompt_difference
    from rleif_kit.core.config import EvalConfig

    humaneval = next(b for b in CODE.benchmarks if b.name == "humaneval")
    item = {"problem": {"prompt": "def f(x):\n    \"\"\"Double x.\"\"\"\n"}}
    asked = humaneval.prompt(item, EvalConfig())
    assert humaneval.own_prompt and "Create a Python script for this problem:" in asked
    assert asked != CODE.train_prompt(item["problem"]["prompt"])  # the recipe's difference ...
    verdict = known_prompt_difference(CODE, ["humaneval"], "sft vs eval")
    assert verdict.status == "ok" and "known, intended" in verdict.advice  # ... reported as known and intended
    tiny = TINY.benchmarks[0]
    question = "Write a Python function f(xs) that returns the list xs in reverse order."
    assert not tiny.own_prompt and tiny.prompt({"question": question}, EvalConfig()) == TINY.train_prompt(question)


# ------------------------------------------------------------------------------ answers and steps


def test_the_answer_template_asks_for_one_python_block():
    from conftest import ROOT

    text = CODE.answer_template(ROOT / "params" / "prompts")
    assert "{instruction}" in text and "```python" in text
    assert "{instruction}" in CODE.tests_template(ROOT / "params" / "prompts")


def test_answers_are_normalised_to_a_python_block_or_rejected():
    fenced = "Here it is:\n```python\ndef f(a):\n    return a\n```\nIt returns a."
    assert CODE.normalise_answer(fenced) == fenced
    assert CODE.normalise_answer("def f(a):\n    return a") == "```python\ndef f(a):\n    return a\n```"
    with pytest.raises(AnswerRejected, match="answer_no_code"):
        CODE.normalise_answer("The answer is 7.")
    with pytest.raises(AnswerRejected, match="answer_code_invalid"):
        CODE.normalise_answer("```python\ndef f(a:\n```")


def test_extraction_is_wizardcoders_postprocessing():
    text = "Sure.\n```python\ndef f(a, b):\n    return a + b\n\n# Example usage\nprint(f(1, 2))\n```\nDone."
    assert CODE.extract_answer(text) == "def f(a, b):\n    return a + b"
    assert CODE.extract_answer("no code at all") == "no code at all"  # no block: the text, as process_humaneval.py
    assert CODE.extract_answer("```python\n```") is None


def test_a_step_of_a_program_is_a_statement_block_and_the_explanation_ends_the_last():
    text = ("Here:\n```python\nimport math\n\ndef f(xs, n):\n    \"\"\"Doc.\"\"\"\n    # keep the last n\n"
            "    out = xs[len(xs) - n:]\n    for x in out:\n        if x:\n            pass\n    return out\n```\n"
            "It slices.")
    assert CODE_STEPS.segments(text) == [
        "import math",
        "def f(xs, n):\n    \"\"\"Doc.\"\"\"\n    # keep the last n\n    out = xs[len(xs) - n:]",  # def line + body 1
        "for x in out:\n        if x:\n            pass",  # a loop with everything under it is one step
        "return out\n```\nIt slices.",  # the last step runs to the end of the response
    ]
    assert CODE_STEPS.char_ends(text)[-1] == len(text)
    assert CODE_STEPS.segments(block("    return a + b\n")) == ["def f(a, b):\n    return a + b\n```"]
    assert CODE_STEPS.segments("def f(a, b:\n    return a\n x") == ["def f(a, b:", "return a", "x"]  # by line
    assert CODE_STEPS.char_ends("just words") == []  # one line that does not parse: no steps
    assert CODE_STEPS.well_formed(block("    return a\n")) and not CODE_STEPS.well_formed("x = 1")


# ------------------------------------------------------------------------------ rV


@pytest.mark.parametrize("program, rv", [
    (block("    return a + b\n"), 1.0),  # right
    (block("    return a + b if a != 10 else 0\n"), 0.75),  # one test of four wrong
    (block("    return a - b\n"), 0.0),
    (block("    raise ValueError('no')\n"), 0.0),  # crashes
    (block("    return a +\n"), 0.0),  # does not parse
    ("I cannot write this function.", 0.0),  # no code
    (block("    while True:\n        pass\n"), 0.0),  # hangs: the timeout kills it
])
def test_rv_is_the_share_of_tests_a_program_passes(program, rv):
    assert CODE.verify(ADD, program) == rv
    assert CODE.is_correct(ADD, program) is (rv == 1.0)


def test_rv_is_none_for_a_task_without_tests():
    assert CODE.verify({"text": "Do it.", "problem": {"entry_point": "f", "tests": []}}, block("    return 1\n")) is None
    assert CODE.verify({"text": "Do it."}, block("    return 1\n")) is None


@pytest.mark.parametrize("name", sorted(TRICKS))
def test_a_hostile_rollout_scores_zero(name):
    rollout = block(TRICKS[name])
    assert CODE.verify(ADD, rollout) == 0.0, name


@pytest.mark.parametrize("name", FORGERIES)
def test_a_rollout_that_forges_the_verdict_channel_with_the_right_values_scores_zero(name):
    """Issue 42: writing the right values into the sandbox's result file and exiting scored rV 1.0."""
    rollout = block(forgeries([5, 8, 7, 6])[name])
    assert CODE.verify(ADD, rollout) == 0.0, name

def test_the_tests_never_enter_the_rollouts_program():
    from rleif_kit.worlds.code.judging import value_program
    from rleif_kit.worlds.code.verifier import cases_of

    problem, cases = cases_of(ADD)
    program = value_program(problem, "def f(a, b):\n    return a + b\n", cases)
    assert "== 5" not in program and "assert" not in program and "(2, 3)" in program  # arguments only


def test_a_batch_of_rollouts_runs_in_parallel_in_order():
    programs = [block("    return a + b\n"), block("    return a - b\n")] * 16
    checked = CODE.check_batch([ADD] * len(programs), programs, workers=2)
    assert [c.rv for c in checked] == [1.0, 0.0] * 16
    assert all(c.seconds > 0 for c in checked)


def test_threads_running_programs_at_once_never_share_a_slot():
    from rleif_kit.sandbox import slots

    held, seen, clash = set(), [], []
    lock = threading.Lock()

    def take():
        for _ in range(200):
            s = slots._acquire_slot()
            with lock:
                clash.append(s in held)
                held.add(s)
                seen.append(s)
            with lock:
                held.discard(s)
            slots._release_slot(s)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not any(clash) and len(seen) == 800


# ------------------------------------------------------------------------------ evolved tasks' tests


@pytest.mark.parametrize("record, reason", [
    ({**ADD, "answer": block("    return a + b\n")}, None),
    ({**ADD, "answer": block("    return a * b\n")}, "tests_fail"),  # tests and answer disagree
    ({**ADD, "answer": "It adds them."}, "answer_no_code"),
    ({"text": "t", "answer": block("    return a + b\n")}, "no_tests"),
    ({"text": "t", "answer": block("    return a + b\n"),
      "problem": {"entry_point": "f", "tests": ["assert f(1, 2 == 3"]}}, "tests_unreadable"),  # does not parse
    ({"text": "t", "answer": block("    return a + b\n"),
      "problem": {"entry_point": "f", "tests": ["assert sorted(f(1, 2)) == [3]"]}}, "tests_unreadable"),  # not by value
])
def test_an_evolved_tasks_tests_run_against_its_reference(record, reason):
    assert vet_reference(record) == reason


def test_tests_are_read_from_an_endpoints_reply():
    reply = "Here are the tests:\n```python\nassert add(2, 3) == 5\nassert add(0, 0) == 0\nprint('ok')\n```"
    assert CODE.read_tests({"id": "x"}, reply) == {"problem": {"entry_point": "add",
                                                               "tests": ["assert add(2, 3) == 5", "assert add(0, 0) == 0"]}}
    assert CODE.read_tests({"id": "x"}, "I would test it by hand.") == {}


# ------------------------------------------------------------------------------ counterfactual edits


def test_each_code_edit_moves_rv_the_way_its_direction_says():
    program = "```python\ndef f(lo, hi):\n    return sum(range(lo, hi + 1)) + 7\n```"
    record = {"text": "t", "problem": {"entry_point": "f", "tests": ["assert f(1, 3) == 13", "assert f(2, 2) == 9"]}}
    assert CODE.verify(record, program) == 1.0
    for name, (edit, direction) in CODE_EDITS.items():
        edited = edit(program)
        assert edited is not None and edited != program, name
        assert (CODE.verify(record, edited) == 1.0) is (direction == "same"), (name, edited)
    assert CODE_EDITS["off_by_one"][0](program).count("range(lo, hi)") == 1
    assert CODE_EDITS["rename"][0]("no code here") is None


def test_the_tiny_code_preset_loads_and_its_world_checks_it():
    from conftest import ROOT
    from rleif_kit.worlds import world_for

    cfg = load_config(ROOT / "params" / "tiny-code.toml")
    assert world_for(cfg).name == "tiny_code" and cfg.ppo.reward_formula == "rI * rV"
