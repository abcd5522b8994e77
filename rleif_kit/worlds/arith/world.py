"""The arithmetic world on the ``World`` interface: GSM8k-shaped problems with small numbers, a step verifier,
a programmatic evolver and judge, so the CPU demo runs offline (``[base] world = "arith"``).

Data specs ``"arith:N"`` (``[sft] dataset``, ``[evol_instruct] seeds``) draw N problems; the run's held-out
split (``paths.arith_heldout``) is written once and never trained on: 01 never draws a seed from it, 03 and 05
measure on it, the probes edit it. Its operator templates are the math world's (``params/prompts/math/``), for a
run that evolves arithmetic seeds through an endpoint.
"""

from __future__ import annotations

import random
from typing import Any, Mapping

from rleif_kit.core.jsonl import read_jsonl, read_user_jsonl, write_jsonl
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.evolver import DefectRates, ambiguous_text, evolve_arith, unsolvable_text
from rleif_kit.worlds.arith.judge import arith_quality, verifier_labels
from rleif_kit.worlds.base import Benchmark, Operator, World
from rleif_kit.worlds.counterfactuals import drop_number
from rleif_kit.worlds.math.sft import rewrite_to_steps
from rleif_kit.worlds.math.stepwise import normalise_solution
from rleif_kit.worlds.math.world import MATH_OPERATORS


def _check(item: Mapping[str, Any], response: str, ev: Any = None) -> dict:
    gold, question = item.get("gold"), item.get("question")
    answer = arith.extract_answer(response)
    return {"gold": str(gold), "answer": answer, "correct": answer is not None and answer == str(gold),
            "steps_ok": arith.verify_solution(question, response, gold).all_ok if question else None}


class ArithWorld(World):
    name = "arith"
    about = "the offline arithmetic world: GSM8k-shaped problems with small numbers and a step verifier"
    prompts = "math"  # an endpoint evolves arithmetic seeds with the math operators' templates
    operators: tuple[Operator, ...] = MATH_OPERATORS
    heldout_benchmark = "arith"
    programmatic = True
    judge_about = ("the arithmetic judge (quality = well formed 8 + no leaked template 4 + solvable 2 + steps in "
                   "range 1)")
    verifier_about = "the step verifier (every step's arithmetic and the answer right)"
    spec_prefix = "arith"  # [sft] dataset / [evol_instruct] seeds = "arith:N"

    def __init__(self) -> None:
        self.benchmarks = (Benchmark("arith", self._load, lambda item, ev: self.train_prompt(item["question"],
                                                                                              cot=ev.cot_prompt),
                                     check=_check, summary=("steps_ok",), default_source="run",
                                     missing_data="pass --data FILE (e.g. <output_dir>/arith/heldout.jsonl) or set "
                                                  "eval.arith_path in settings.json"),)

    # ------------------------------------------------------------------ answers

    def extract_answer(self, response: str) -> str | None:
        return arith.extract_answer(response)

    def is_correct(self, record: Mapping[str, Any], response: str) -> bool | None:
        problem = record.get("problem")
        if not problem:
            return None
        answer = arith.extract_answer(response)
        return answer is not None and answer == str(arith.Problem.from_record(problem).answer())

    def verify(self, record: Mapping[str, Any], response: str) -> float | None:
        """rV = the step verifier: 1 when every step and the answer are right, else 0 (a response without steps
        too); None for a record without its problem (nothing to verify against)."""
        labels = self.step_labels(record, response)
        return None if labels is None else float(bool(labels) and all(labels))

    def step_labels(self, record: Mapping[str, Any], solution: str) -> list[bool] | None:
        problem = record.get("problem")
        if not problem:
            return None
        question = record.get("text", record.get("question"))
        return verifier_labels(question, solution, arith.Problem.from_record(problem).answer())

    def normalise_answer(self, answer: str) -> str:
        return normalise_solution(answer)  # the math world's rules: the format is the same

    def rewrite_answers(self, cfg: Any, settings: Any, items: list[dict]) -> dict[str, str | None]:
        return rewrite_to_steps(cfg, settings, items)

    # ------------------------------------------------------------------ evolution

    def evolve(self, cfg: Any, parent: Mapping[str, Any], operator: Operator, rng: Any) -> dict:
        """Structural edits of the parent's problem, with defects injected at ``[evol_instruct] defect_rate``."""
        base = DefectRates()
        total = sum(vars(base).values())
        scale = cfg.evol_instruct.defect_rate / total if total else 0.0
        rates = DefectRates(**{k: v * scale for k, v in vars(base).items()})
        a = cfg.arith
        out = evolve_arith(arith.Problem.from_record(parent["problem"]), operator.name, rng, rates=rates,
                           max_steps=a.max_steps + 2, min_steps=a.min_steps, max_operand=a.max_operand)
        return {"text": out.text, "answer": out.answer, "finish_reason": out.finish_reason,
                "extra": {"problem": out.problem, "defect": out.defect}}

    def sibling_quality(self, cfg: Any, record: Mapping[str, Any]) -> float:
        return arith_quality(dict(record), cfg.arith.min_steps, cfg.arith.max_steps)

    def check_seeds(self, seeds: list[dict]) -> None:
        if not all(s.get("problem") for s in seeds):
            raise ValueError("[evol_instruct] backend = 'world' on the arithmetic world needs arithmetic seeds: "
                             "seeds = 'arith:N', or JSONL records with a 'problem' (as a loop iteration's "
                             "seeds.jsonl has)")

    # ------------------------------------------------------------------ data

    def _splits(self, cfg: Any, paths: Any, train_n: int) -> tuple[list[dict], list[dict]]:
        """Train problems and the run's fixed held-out problems (disjoint by question text)."""
        a = cfg.arith
        train, heldout = arith.generate_splits(train_n, a.heldout_size, seed=cfg.base.seed, min_steps=a.min_steps,
                                               max_steps=a.max_steps, max_operand=a.max_operand)
        if paths is not None and not paths.arith_heldout.exists():
            write_jsonl(paths.arith_heldout, heldout)
        return train, heldout

    def solution_sample(self, cfg: Any, k: int) -> list[str]:
        a = cfg.arith
        return [p["solution"] for p in arith.generate_problems(k, seed=cfg.base.seed, min_steps=a.min_steps,
                                                                max_steps=a.max_steps, max_operand=a.max_operand)]

    def heldout(self, cfg: Any, paths: Any) -> list[dict]:
        """The run's held-out set (written on first use)."""
        if not paths.arith_heldout.exists():
            self._splits(cfg, paths, train_n=1)
        return list(read_jsonl(paths.arith_heldout))

    def _heldout_readonly(self, cfg: Any, paths: Any) -> list[dict]:
        """The held-out problems: the file when written, else the same drawn in memory (a check writes no file)."""
        if paths.arith_heldout.exists():
            return list(read_jsonl(paths.arith_heldout))
        return self._splits(cfg, None, train_n=1)[1]

    def teacher_solutions(self, cfg: Any, train: list[dict]) -> list[str]:
        """The SFT solution of each generated problem: gold, except the seeded ``[arith].teacher_early_stop``
        share of ``max_steps``-step problems, whose teacher stops one step early (wrong final answer)."""
        rate, longest = cfg.arith.teacher_early_stop, cfg.arith.max_steps
        rng = random.Random(f"{cfg.base.seed}-teacher")
        out = []
        for r in train:
            wrong = longest >= 2 and r["n_steps"] == longest and rng.random() < rate
            out.append(arith.Problem.from_record(r).early_stop_solution() if wrong else r["solution"])
        return out

    def sft_rows(self, cfg: Any, paths: Any, settings: Any = None) -> list[dict] | None:
        n = self.generated_size(cfg.sft.dataset)
        if n is None:
            return None
        train, _ = self._splits(cfg, paths, n)
        return [{"id": r["id"], "instruction": r["question"], "response": s}
                for r, s in zip(train, self.teacher_solutions(cfg, train))]

    def seeds(self, cfg: Any, paths: Any, n: int) -> list[dict]:
        """Arithmetic seeds, never one of the held-out problems."""
        heldout = {p["question"] for p in self.heldout(cfg, paths)}
        a = cfg.arith
        problems = arith.generate_problems(n + len(heldout) // 10 + 10, seed=cfg.base.seed + 1, prefix="seed",
                                           min_steps=a.min_steps, max_steps=a.max_steps, max_operand=a.max_operand)
        picked = [p for p in problems if p["question"] not in heldout][:n]
        return [{"id": p["id"], "root_id": p["id"], "round": 0, "text": p["question"], "answer": p["solution"],
                 "problem": p["problem"]} for p in picked]

    def probe_solutions(self, cfg: Any, paths: Any) -> list[dict]:
        return [{"id": p["id"], "text": p["question"], "solution": p["solution"], "problem": p}
                for p in self._heldout_readonly(cfg, paths)]

    def instruction_probe_pairs(self, cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
        out: dict[str, list[tuple[str, str]]] = {"unsolvable": [], "ambiguous": [], "number_removed": []}
        for i, p in enumerate(self._heldout_readonly(cfg, paths)):
            problem = arith.Problem.from_record(p)
            out["unsolvable"].append((p["question"], unsolvable_text(problem, seed=cfg.base.seed + i)))
            out["ambiguous"].append((p["question"], ambiguous_text(problem, seed=cfg.base.seed + i)))
            dropped = drop_number(p["question"])
            if dropped is not None:
                out["number_removed"].append((p["question"], dropped))
        return out

    def probe_source(self, paths: Any) -> str:
        return f"held-out problems ({paths.rel(paths.arith_heldout)})"

    def answer_edits(self, cfg: Any, paths: Any, n: int = 300) -> dict[str, list[tuple[str, str]]]:
        """The first ``n`` held-out 3-step problems: gold, stopped one step early (the tiny teacher's error), and
        with the answer line saying 999."""
        problems = [p for p in self.heldout(cfg, paths) if p["n_steps"] == 3][:n]
        complete = [(p["question"], p["solution"]) for p in problems]
        return {"complete": complete,
                "early": [(p["question"], arith.Problem.from_record(p).early_stop_solution()) for p in problems],
                "wrong": [(q, s.rsplit("The answer is:", 1)[0] + "The answer is: 999") for q, s in complete]}

    def _load(self, path: Any, cfg: Any, paths: Any) -> list[dict]:
        if path is not None:
            records = [r for _, r in read_user_jsonl(path, "arith data")]
        elif cfg is not None and paths is not None:
            records = self.heldout(cfg, paths)
        else:
            raise FileNotFoundError(f"arith: {self.benchmarks[0].missing_data}")
        items = []
        for i, r in enumerate(records):
            if not isinstance(r.get("question"), str) or r.get("answer") is None:
                raise ValueError(f"{path or 'arith held-out set'}: record {i + 1} needs 'question' and 'answer'")
            items.append({"id": str(r.get("id", f"arith-{i:05d}")), "question": r["question"],
                          "gold": str(r["answer"])})
        return items


WORLD = ArithWorld()
