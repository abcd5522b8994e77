"""The math world on the ``World`` interface: GSM8k and MATH, WizardMath's prompt, its checkers (``[base] world =
"math"``, the default).

Truth and the verifier rV come from the gold answer a record carries — GSM8k's ``#### N`` or MATH's
``\\boxed{}`` — read strictly, as evaluation reads it (``answers.check_gsm8k`` / ``check_math``); the data step
carries ``gold`` and ``source`` through evolution where the answer is known (seeds; an evolved task inherits
none, since its answer changed). Operators: WizardMath's upward and downward Evol-Instruct methods.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.worlds.base import BREADTH_OPERATORS, Benchmark, Operator, World
from rleif_kit.worlds.math.answers import check_gsm8k, check_math, math_gold
from rleif_kit.worlds.math.data import hub_source, load_gsm8k, load_hub_dataset, load_math
from rleif_kit.worlds.math.probes import number_removed_pairs, probe_items
from rleif_kit.worlds.math.second_opinion import math_verify_check
from rleif_kit.worlds.math.sft import build_sft_dataset, load_training_problems, rewrite_to_steps
from rleif_kit.worlds.math.stepwise import NormaliseError, normalise_solution

MATH_OPERATORS = (
    Operator("add_constraint", "up", method="add constraints"), Operator("concretize", "up", method="concretizing"),
    Operator("more_steps", "up", method="increase reasoning steps"), Operator("deepen", "up", method="deepening"),
    Operator("simplify", "down", method="downward evolution (easier)"),
    Operator("new_topic", "down", method="downward evolution (another topic)"),
)



def _hub(name: str, cfg: Any = None) -> list[dict]:
    try:
        return load_hub_dataset(name, "test", hub_source(cfg, name) if cfg is not None else None)
    except RuntimeError as e:
        raise FileNotFoundError(f"{name} test set: no local file (set eval.{name}_path in settings.json, or "
                                f"pass --data) and the hub failed: {e}") from None


def _gsm8k(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    records = load_gsm8k(path) if path is not None else _hub("gsm8k", cfg)
    return [{"id": r["id"], "question": r["question"], "gold": r["gold"]} for r in records]


def _math(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    records = load_math(path) if path is not None else _hub("math", cfg)
    return [{"id": r["id"], "question": r["question"], "gold": r["gold"], "level": r.get("level"),
             "type": r.get("type")} for r in records]


def check_gsm8k_item(item: Mapping[str, Any], response: str, ev: Any) -> dict:
    """Strict, flexible, compat and math-verify's verdict (``second_opinion``: recorded, never the headline)."""
    checked = check_gsm8k(response, str(item.get("gold")), compat=ev.compat_gsm8k)
    return {**checked, **math_verify_check(response, checked["gold"])}


def check_math_item(item: Mapping[str, Any], response: str, ev: Any) -> dict:
    """Strict, compat and math-verify's verdict (``second_opinion``: recorded, never the headline)."""
    gold = item.get("gold")
    checked = check_math(response, math_gold(gold) if gold and "\\boxed" in gold else gold,
                         question=item.get("question"), compat=ev.compat_math)
    return {**checked, **math_verify_check(response, checked["gold"])}


class MathWorld(World):
    name = "math"
    about = "GSM8k and MATH: WizardMath's prompt, its step format and strict answer checkers"
    verifier_about = "the answer checker against the gold answer"
    operators = MATH_OPERATORS + BREADTH_OPERATORS
    builds_from = "[sft] gsm8k_train / math_train"

    def __init__(self) -> None:
        prompt = lambda item, ev: self.train_prompt(item["question"], cot=ev.cot_prompt)  # noqa: E731
        self.benchmarks = (
            Benchmark("gsm8k", _gsm8k, prompt, check=check_gsm8k_item,
                      summary=("flexible_correct", "compat_correct", "math_verify_correct"),
                      meta=lambda ev: {"compat": ev.compat_gsm8k}),
            Benchmark("math", _math, prompt, check=check_math_item, summary=("compat_correct", "math_verify_correct"),
                      meta=lambda ev: {"compat": ev.compat_math}, category=lambda item: item.get("type")))

    def is_correct(self, record: Mapping[str, Any], response: str) -> bool | None:
        """Strict GSM8k / MATH checking against the record's ``gold`` (or GSM8k's ``answer`` with ``#### N``)."""
        gold = record.get("gold")
        if gold is None and "####" in str(record.get("answer", "")):
            gold = record["answer"]
        if gold is None:
            return None
        if record.get("benchmark") == "math" or record.get("source") == "math":
            question = record.get("question", record.get("instruction", record.get("text")))
            return bool(check_math(response, str(gold),
                                   question=question if isinstance(question, str) else None)["correct"])
        return bool(check_gsm8k(response, str(gold))["correct"])

    def normalise_answer(self, answer: str) -> str:
        return normalise_solution(answer)

    def rewrite_answers(self, cfg: Any, settings: Any, items: list[dict]) -> dict[str, str | None]:
        return rewrite_to_steps(cfg, settings, items)

    def build_probe_set(self, cfg: Any, paths: Any, settings: Any = None) -> tuple[list[dict], list[str]]:
        """(probe records, notes) from the GSM8k / MATH test files at hand (``settings.json`` eval paths)."""
        items, notes = [], []
        for bench in ("gsm8k", "math"):
            raw = getattr(settings.eval, f"{bench}_path", None) if settings is not None else None
            if not raw:
                continue
            path = cfg.resolve(raw)
            if not path.exists():
                notes.append(f"probe set: eval.{bench}_path = {raw!r} not found")
                continue
            try:
                got, skipped = probe_items(bench, path, seed=cfg.base.seed)
            except (ValueError, OSError) as e:  # 06 reports a bad test file; the data step goes on without it
                notes.append(f"probe set: eval.{bench}_path not read ({e})")
                continue
            items += got
            if skipped:
                notes.append(f"probe set: {skipped} {bench} test items have no step structure the rules read; "
                             "left out")
        if not items:
            notes.append("probe set: no GSM8k / MATH test file in settings.json (eval.gsm8k_path, eval.math_path): "
                         "the reward models' probes are skipped")
        return items, notes

    def probe_solutions(self, cfg: Any, paths: Any) -> list[dict]:
        return list(read_jsonl(paths.probe_set)) if paths.probe_set.exists() else []

    def instruction_probe_pairs(self, cfg: Any, paths: Any) -> dict[str, list[tuple[str, str]]]:
        return number_removed_pairs(self.probe_solutions(cfg, paths))

    def training_problems(self, cfg: Any) -> list[dict]:
        return load_training_problems(cfg)

    def build_sft_dataset(self, cfg: Any, settings: Any = None) -> dict | None:
        if not (cfg.sft.gsm8k_train or cfg.sft.math_train):
            return None
        return build_sft_dataset(cfg, settings)


WORLD = MathWorld()
__all__ = ["WORLD", "MATH_OPERATORS", "NormaliseError"]
