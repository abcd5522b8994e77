"""The tiny code world on the ``World`` interface: one-line Python functions with hidden tests, a teacher with a
systematic fault, a programmatic evolver and judge, so the WizardCoder arm runs 00 -> 07 offline on a CPU
(``[base] world = "tiny_code"``, ``params/tiny-code.toml``).

It is the code world (WizardCoder's training prompt, ```python answers cut by its post-processing, rV = the share
of a task's tests passed in the sandbox, statement-block steps) with tasks a tiny Llama can learn
(``tasks.py``). Data specs ``"tiny_code:N"`` (``[sft] dataset``, ``[evol_instruct] seeds``) draw N tasks; the
run's held-out split (``<output_dir>/tiny_code/heldout.jsonl``) is written once and never trained on. Its
benchmark ``tiny_code`` asks in the training prompt, so training and evaluation share one prompt here (the
published recipe's HumanEval prompt differs, on purpose: see the code world).
"""

from __future__ import annotations

import random
from typing import Any, Mapping, Sequence

from rleif_kit.core.jsonl import read_jsonl, read_user_jsonl, write_jsonl
from rleif_kit.worlds.base import Benchmark, Operator
from rleif_kit.worlds.code import mbpp
from rleif_kit.worlds.code.postprocess import extract_code
from rleif_kit.worlds.code.world import CodeWorld
from rleif_kit.worlds.tiny_code import tasks
from rleif_kit.worlds.tiny_code.evolver import evolve_task, task_quality

OPERATORS = (  # Code Evol-Instruct's, as the structure can carry them out (templates: params/prompts/code/evol/)
    Operator("add_requirement", "up", method="add constraints (one more operation on the result)"),
    Operator("rarer_requirement", "up", method="replace a requirement with a less common one (another variant)"),
    Operator("simplify", "down", method="downward evolution (one operation fewer)"),
    Operator("new_topic", "down", method="downward evolution (a simple task of another family)"),
)


def benchmark_item(record: Mapping[str, Any]) -> dict:
    """A held-out task as a HumanEval-shaped benchmark item (empty prompt: the completion is the whole program), with
    its task family (``range``, ``slice``, ...) for 06's breakdown."""
    problem = record["problem"]
    test = mbpp.check_source({"test_list": problem["tests"]}, problem["entry_point"])
    return {"id": record["id"], "question": record["question"], "gold": None, "family": problem.get("family"),
            "problem": {"task_id": record["id"], "prompt": "", "entry_point": problem["entry_point"], "test": test}}


class TinyCodeWorld(CodeWorld):
    name = "tiny_code"
    about = "the offline code world: one-line Python functions with hidden tests, for the CPU demo"
    prompts = "code"
    operators = OPERATORS
    heldout_benchmark = "tiny_code"
    programmatic = True
    judge_about = "the tiny-code judge (quality = well formed 8 + solvable 4 + tests right 2 + ops in range 1)"
    prompt_note = ""  # one prompt for training and evaluation
    spec_prefix = "tiny_code"  # [sft] dataset / [evol_instruct] seeds = "tiny_code:N"

    def __init__(self) -> None:
        self.benchmarks = (Benchmark("tiny_code", self._load, lambda item, ev: self.train_prompt(item["question"]),
                                     runs_code=True, extract=extract_code, default_source="run",
                                     task_example="\"tiny_code-heldout-00000\"",
                                     missing_data="pass --data FILE (e.g. <output_dir>/tiny_code/heldout.jsonl)"),)

    # ------------------------------------------------------------------ truth and the step verifier

    def step_labels(self, record: Mapping[str, Any], solution: str) -> list[bool] | None:
        """Outcome labels: every step of a program that passes all its tests is right, every step of one that
        fails is wrong (a tiny-code program is one statement: its step is the program). None without tests."""
        return self.step_labels_batch([record], [solution])[0]

    def step_labels_batch(self, records: Sequence[Mapping[str, Any]], solutions: Sequence[str]) -> list:
        """:meth:`step_labels` of many programs, all in the sandbox at once."""
        return [None if v.correct is None else [v.correct] * len(self.steps.char_ends(s))
                for v, s in zip(self.check_batch(records, solutions), solutions)]

    # ------------------------------------------------------------------ evolution

    def evolve(self, cfg: Any, parent: Mapping[str, Any], operator: Operator, rng: Any) -> dict:
        return evolve_task(dict(parent), operator.name, rng, cfg.evol_instruct.defect_rate, cfg.tiny_code.max_ops,
                           seed=f"{cfg.base.seed}-{parent['id']}-{operator.name}")

    def sibling_quality(self, cfg: Any, record: Mapping[str, Any]) -> float:
        return task_quality(dict(record), cfg.tiny_code.max_ops)

    def check_seeds(self, seeds: list[dict]) -> None:
        if not all((s.get("problem") or {}).get("family") for s in seeds):
            raise ValueError("[evol_instruct] backend = 'world' on the tiny code world needs its own tasks as seeds: "
                             "seeds = 'tiny_code:N', or JSONL records with a 'problem' (as a loop iteration's "
                             "seeds.jsonl has)")

    # ------------------------------------------------------------------ data

    def tokenizer_corpus(self, cfg: Any) -> list[str]:
        """Prompts and solutions of tiny-code tasks (both teachers' versions), each its own text: a solution follows
        ``### Response:`` with no space, and trained as one text the tokenizer would learn ``:```'' as one token,
        so a prompt tokenized alone (as generation sees it) would end in a token SFT never saw there."""
        out = []
        for r in tasks.draw(cfg.tiny.corpus_problems, f"{cfg.base.seed}-corpus", "corpus", max_ops=cfg.tiny_code.max_ops):
            task = tasks.Task.from_problem(r["problem"])
            out += [self.train_prompt(r["question"]), r["solution"], task.solution(fault=True)]
        return out

    def _heldout_path(self, paths: Any):
        return paths.world_dir(self.name) / "heldout.jsonl"

    def _draw_heldout(self, cfg: Any) -> list[dict]:
        return tasks.draw(cfg.tiny_code.heldout_size, f"{cfg.base.seed}-heldout", "tiny_code-heldout",
                          max_ops=cfg.tiny_code.max_ops)

    def heldout(self, cfg: Any, paths: Any) -> list[dict]:
        """The run's held-out tasks (written on first use): ``{"id", "question", "solution", "answer", "problem"}``."""
        path = self._heldout_path(paths)
        if not path.exists():
            write_jsonl(path, [{**r, "answer": None} for r in self._draw_heldout(cfg)])
        return list(read_jsonl(path))

    def _heldout_readonly(self, cfg: Any, paths: Any) -> list[dict]:
        path = self._heldout_path(paths)
        return list(read_jsonl(path)) if path.exists() else self._draw_heldout(cfg)

    def _exclude(self, cfg: Any, paths: Any) -> set[str]:
        return {p["question"] for p in (self.heldout(cfg, paths) if paths is not None else self._draw_heldout(cfg))}

    def teacher_solution(self, cfg: Any, record: Mapping[str, Any], rng: random.Random) -> str:
        """The tiny teacher's solution: right, except the ``teacher_fault`` share of tasks with a known pitfall."""
        task = tasks.Task.from_problem(record["problem"])
        return task.solution(fault=task.faulty and rng.random() < cfg.tiny_code.teacher_fault)

    def sft_rows(self, cfg: Any, paths: Any, settings: Any = None) -> list[dict] | None:
        n = self.generated_size(cfg.sft.dataset)
        if n is None:
            return None
        rng = random.Random(f"{cfg.base.seed}-teacher")
        train = tasks.draw(n, f"{cfg.base.seed}-train", "tiny_code-train", self._exclude(cfg, paths),
                           max_ops=cfg.tiny_code.max_ops)
        return [{"id": r["id"], "instruction": r["question"], "response": self.teacher_solution(cfg, r, rng)}
                for r in train]

    def solution_sample(self, cfg: Any, k: int) -> list[str]:
        return [r["solution"] for r in tasks.draw(k, f"{cfg.base.seed}-sample", "sample", max_ops=cfg.tiny_code.max_ops)]

    def seeds(self, cfg: Any, paths: Any, n: int) -> list[dict]:
        """Tiny-code seeds with their reference answers and tests, never one of the held-out tasks."""
        rng = random.Random(f"{cfg.base.seed}-seed-teacher")
        picked = tasks.draw(n, f"{cfg.base.seed}-seeds", "seed", self._exclude(cfg, paths), max_ops=cfg.tiny_code.max_ops)
        return [{"id": p["id"], "root_id": p["id"], "round": 0, "text": p["question"],
                 "answer": self.teacher_solution(cfg, p, rng), "problem": p["problem"]} for p in picked]

    def probe_source(self, paths: Any) -> str:
        return f"held-out tasks ({paths.rel(self._heldout_path(paths))})"

    def probe_solutions(self, cfg: Any, paths: Any) -> list[dict]:
        return [{"id": p["id"], "text": p["question"], "solution": p["solution"], "problem": p["problem"]}
                for p in self._heldout_readonly(cfg, paths)]

    def instruction_probe_pairs(self, cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
        """(clean, edited) pairs the IRM must score lower: the instruction no longer says what to return."""
        return {"unsolvable": [(p["question"], p["question"].split(" that returns ")[0] + " that returns the result.")
                               for p in self._heldout_readonly(cfg, paths)]}

    def answer_edits(self, cfg: Any, paths: Any, n: int = 300) -> dict[str, list[tuple[str, str]]]:
        """Held-out tasks with a pitfall three ways: right, with the teacher's fault ("early": the systematic
        error), and with a wrong sign."""
        faulty = [p for p in self.heldout(cfg, paths) if tasks.Task.from_problem(p["problem"]).faulty][:n]
        complete = [(p["question"], p["solution"]) for p in faulty]
        return {"complete": complete,
                "early": [(p["question"], tasks.Task.from_problem(p["problem"]).solution(fault=True)) for p in faulty],
                "wrong": [(q, s.replace("return ", "return -", 1)) for q, s in complete]}

    def _load(self, path: Any, cfg: Any, paths: Any) -> list[dict]:
        if path is not None:
            records = [r for _, r in read_user_jsonl(path, "tiny_code data")]
        elif cfg is not None and paths is not None:
            records = self.heldout(cfg, paths)
        else:
            raise FileNotFoundError(f"tiny_code: {self.benchmarks[0].missing_data}")
        for i, r in enumerate(records, 1):
            if not isinstance(r.get("question"), str) or not (r.get("problem") or {}).get("tests"):
                raise ValueError(f"{path or 'tiny_code held-out set'}: record {i} needs 'question' and 'problem.tests'")
        return [benchmark_item(r) for r in records]


WORLD = TinyCodeWorld()
