"""A test world of about a page: sums of two to four small numbers, on the ``World`` interface alone.

``[base] world = "toy_world"`` (this module, on the path) runs 00 -> 07 offline: it generates its seeds, SFT rows
and held-out split, evolves and ranks programmatically, labels steps with its own verifier and brings its own
benchmark (``tests/test_toy_world.py``; docs/worlds.md walks through it) and its own config section,
``[toy_world] max_terms``. Nothing in ``rleif_kit`` names it.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from rleif_kit.core.config import Section, between, opt
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.worlds.base import Benchmark, Operator, World
from rleif_kit.worlds.steps import STEPWISE

SUM = re.compile(r"(\d+)\s*\+\s*(\d+)\s*=\s*(\d+)")


def solve(numbers: list[int]) -> str:
    steps, total = [], numbers[0]
    for i, n in enumerate(numbers[1:], 1):
        steps.append(f"Step {i}: {total} + {n} = {total + n}.")
        total += n
    return " ".join(steps) + f" The answer is: {total}"


def question(numbers: list[int]) -> str:
    return "Add " + ", ".join(map(str, numbers[:-1])) + f" and {numbers[-1]}."


def problem(rid: str, numbers: list[int]) -> dict:
    return {"id": rid, "question": question(numbers), "solution": solve(numbers), "answer": sum(numbers),
            "problem": {"numbers": numbers}}  # "problem": what the stages carry through for a programmatic world


@dataclass(frozen=True)
class ToyOptions(Section):
    """``[toy_world]``: validated like the kit's own sections (help text, range, "did you mean")."""

    max_terms: int = opt(4, "most numbers a sum adds (generated problems and 'more_steps' evolutions)", between(2, 9))


def max_terms(cfg) -> int:
    return cfg.section("toy_world").max_terms


class SumWorld(World):
    name = "toy_world"
    about = "sums of two to four small numbers (the test world)"
    prompts = "math"  # an endpoint evolver would use the math templates
    operators = (Operator("more_steps", "up"), Operator("simplify", "down"))
    heldout_benchmark = "toy_sums"
    programmatic = True
    config_section = "toy_world"
    config_class = ToyOptions

    def __init__(self) -> None:
        self.benchmarks = (Benchmark("toy_sums", lambda path, cfg, paths: [
            {"id": p["id"], "question": p["question"], "gold": str(p["answer"])} for p in self.heldout(cfg, paths)],
            lambda item, ev: self.train_prompt(item["question"], cot=ev.cot_prompt), default_source="run",
            check=lambda item, response, ev: {"gold": item["gold"], "answer": self.extract_answer(response),
                                              "correct": self.extract_answer(response) == item["gold"]}),)

    def is_correct(self, record, response):
        numbers = (record.get("problem") or {}).get("numbers")
        return None if numbers is None else self.extract_answer(response) == str(sum(numbers))

    def verify(self, record, response):  # rV: every step right
        labels = self.step_labels(record, response)
        return None if labels is None else float(bool(labels) and all(labels))

    def step_labels(self, record, solution):
        """Step k must add the next number to the running total, in either order; a step after a wrong one is
        wrong too, and a wrong final answer makes the last step wrong."""
        numbers = (record.get("problem") or {}).get("numbers")
        if numbers is None:
            return None
        labels, ok, total = [], True, numbers[0]
        for i, step in enumerate(STEPWISE.segments(solution), 1):
            m = SUM.search(step)
            ok = ok and m is not None and i < len(numbers) and sorted(map(int, m.group(1, 2))) == sorted(
                [total, numbers[i]]) and int(m.group(3)) == total + numbers[i]
            total += numbers[i] if i < len(numbers) else 0
            labels.append(ok)
        if labels and not self.is_correct(record, solution):
            labels[-1] = False
        return labels

    def evolve(self, cfg, parent, operator, rng):
        numbers = list(parent["problem"]["numbers"])
        if operator.name == "more_steps" and len(numbers) < max_terms(cfg):
            numbers.append(rng.randint(1, 9))
        elif operator.name == "simplify" and len(numbers) > 2:
            numbers.pop()
        else:
            numbers[-1] = rng.randint(1, 9)
        broken = rng.random() < cfg.evol_instruct.defect_rate  # an evolver's failure: the numbers are gone
        return {"text": "Add the numbers up." if broken else question(numbers), "answer": None if broken else
                solve(numbers), "finish_reason": "stop",
                "extra": {"problem": {"numbers": numbers}, "defect": "unsolvable" if broken else None}}

    def sibling_quality(self, cfg, record):
        return 0.0 if record.get("defect") else 1.0

    def generated_size(self, spec):
        return int(spec.split(":", 1)[1]) if spec.startswith("toy:") else None

    def _draw(self, cfg, rng, n, held, prefix):
        out = []
        while len(out) < n:
            p = problem(f"{prefix}-{len(out):05d}", [rng.randint(1, 9) for _ in range(rng.randint(2, max_terms(cfg)))])
            if p["question"] not in held:
                out.append(p)
        return out

    def heldout(self, cfg, paths):
        path = paths.world_dir(self.name) / "heldout.jsonl"
        if not path.exists():
            write_jsonl(path, self._draw(cfg, random.Random(f"{cfg.base.seed}-heldout"), 200, set(), "toy-heldout"))
        return list(read_jsonl(path))

    def seeds(self, cfg, paths, n):
        held = {p["question"] for p in self.heldout(cfg, paths)}
        return [{"id": p["id"], "root_id": p["id"], "round": 0, "text": p["question"], "answer": p["solution"],
                 "problem": p["problem"]} for p in self._draw(cfg, random.Random(cfg.base.seed + 1), n, held, "seed")]

    def sft_rows(self, cfg, paths, settings=None):
        n = self.generated_size(cfg.sft.dataset)
        if n is None:
            return None
        held = {p["question"] for p in self.heldout(cfg, paths)}
        return [{"id": p["id"], "instruction": p["question"], "response": p["solution"]}
                for p in self._draw(cfg, random.Random(cfg.base.seed), n, held, "toy-train")]

    def probe_source(self, paths):
        return f"held-out problems ({paths.rel(paths.world_dir(self.name))}/heldout.jsonl)"

    def probe_solutions(self, cfg, paths):
        return [{"id": p["id"], "text": p["question"], "solution": p["solution"], "problem": p["problem"]}
                for p in self.heldout(cfg, paths)]


WORLD = SumWorld()
