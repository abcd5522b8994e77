"""Read GSM8k and MATH in their public formats into one record shape.

Why: the evolution and SFT stages want ``{"id", "question", "solution", "gold"}`` whatever the
source, and the sources differ: GSM8k is JSONL with the answer after ``####``, MATH is JSONL or a
tree of per-problem ``.json`` files with the answer in the last ``\\boxed{}``. A record that lacks
a field fails loudly with ``file:line`` (a silently skipped record would shrink the data set
without anyone noticing). The Hugging Face Hub is optional: :func:`load_hub_dataset` imports
``datasets`` only when called, and without network it says to pass a local file instead.

    from rleif_kit.worlds.math.data import load_gsm8k
    records = load_gsm8k("data/gsm8k/train.jsonl")
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Callable, Iterator

from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.user_files import parse_json, read_user_text
from rleif_kit.worlds.math.stepwise import last_boxed

__all__ = ["load_gsm8k", "load_math", "last_boxed", "load_hub_dataset", "hub_source"]

# The default hub datasets ("repo:config"): GSM8k's own; for MATH a full copy with the original fields, since
# hendrycks/competition_math was taken down (16 Jan 2025). [sft] gsm8k_hub / math_hub name others, or a local
# folder that datasets.load_dataset reads (train.jsonl / test.jsonl, parquet, ...).
HUB = {"gsm8k": "openai/gsm8k:main", "math": "DigitalLearningGmbH/MATH-lighteval:default"}


def _require(rec: object, fields: tuple[str, ...], where: str) -> dict:
    """The record itself, after checking it is an object with non-empty string ``fields``."""
    if not isinstance(rec, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(rec).__name__}")
    for name in fields:
        if name not in rec:
            raise ValueError(f"{where}: missing field {name!r} (has {sorted(rec)})")
        if not isinstance(rec[name], str) or not rec[name].strip():
            raise ValueError(f"{where}: field {name!r} must be a non-empty string, got {rec[name]!r}")
    return rec


def _jsonl(path: Path) -> Iterator[tuple[str, object]]:
    """(``file:line``, record) per non-blank line, strictly (``core.jsonl.read_user_jsonl``): an input data set
    with a broken line is broken, even at its end. A ``.parquet`` file gives its rows."""
    if path.suffix == ".parquet":
        yield from load_parquet(path)
        return
    yield from read_user_jsonl(path)


def _gsm8k_gold(answer: str, where: str) -> str:
    """The text after the last '####', thousands separators removed ('1,000' -> '1000')."""
    head, sep, gold = answer.rpartition("####")
    gold = " ".join(gold.split())
    if not sep or not gold:
        raise ValueError(f"{where}: field 'answer' has no '#### <answer>' line")
    return re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", gold)


def _gsm8k_record(rec: object, index: int, where: str) -> dict:
    rec = _require(rec, ("question", "answer"), where)
    return {"id": str(rec.get("id", f"gsm8k-{index:05d}")), "question": rec["question"],
            "solution": rec["answer"], "gold": _gsm8k_gold(rec["answer"], where)}


def _math_record(rec: object, default_id: str, where: str) -> dict:
    rec = _require(rec, ("problem", "solution"), where)
    gold = last_boxed(rec["solution"])
    if not gold:
        raise ValueError(f"{where}: field 'solution' has no \\boxed{{...}} answer")
    return {"id": str(rec.get("id", default_id)), "question": rec["problem"],
            "solution": rec["solution"], "gold": gold, "level": rec.get("level"),
            "type": rec.get("type")}


def load_gsm8k(path: str | os.PathLike[str]) -> list[dict]:
    """GSM8k JSONL ('question', 'answer' ending in '#### 72') -> id/question/solution/gold records.

    ``solution`` is the raw answer text (calculator annotations and all); normalising it into
    steps is :func:`rleif_kit.worlds.math.stepwise.normalise_gsm8k`'s job.
    """
    return [_gsm8k_record(rec, i, where) for i, (where, rec) in enumerate(_jsonl(Path(path)))]


def load_math(path: str | os.PathLike[str]) -> list[dict]:
    """MATH as JSONL, or a directory of the original per-problem .json files (searched recursively).

    Records get id/question/solution/gold/level/type; gold is the last ``\\boxed{}`` content.
    Directory ids are ``math-<relative path>`` (e.g. ``math-train-algebra-1``), so they are
    stable however the tree is walked.
    """
    path = Path(path)
    if not path.is_dir():
        return [_math_record(rec, f"math-{i:05d}", where)
                for i, (where, rec) in enumerate(_jsonl(path))]
    records = []
    for file in sorted(path.rglob("*.json")):
        try:
            rec = parse_json(read_user_text(file, kind="a MATH problem (JSON)"), f"{file}:1")
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}:1: invalid JSON ({exc})") from None
        rel = file.relative_to(path).with_suffix("").as_posix().replace("/", "-")
        records.append(_math_record(rec, f"math-{rel}", f"{file}:1"))
    return records


def _convert(name: str) -> Callable[[object, int, str], dict]:
    if name == "gsm8k":
        return _gsm8k_record
    return lambda rec, i, where: _math_record(rec, f"math-{i:05d}", where)


def hub_source(cfg, name: str) -> str:
    """``[sft] gsm8k_hub`` / ``math_hub`` of a run: a hub id as it is, a local folder resolved against the run's
    project root (used for the training split in 00 and the test split in 06)."""
    hub = cfg.sft.gsm8k_hub if name == "gsm8k" else cfg.sft.math_hub
    local = cfg.resolve(hub)
    return str(local) if local.is_dir() else hub


class HubUnavailable(RuntimeError):
    """A hub dataset that could not be loaded (offline, removed, no ``datasets``): one line, with the remedy."""


def load_hub_dataset(name: str, split: str, source: str | None = None) -> list[dict]:
    """'gsm8k' or 'math' through ``datasets.load_dataset``, as the same records as the local loaders.

    ``source`` is "repo" or "repo:config" (default :data:`HUB`), or a local dataset folder (the same loading
    code, offline). ``datasets`` caches what it downloads. Any failure (no ``datasets`` installed, no network,
    a removed repository) becomes a RuntimeError that says to pass a local file instead: an offline machine
    is normal here.
    """
    if name not in HUB:
        raise ValueError(f"unknown hub dataset {name!r}; expected one of {sorted(HUB)}")
    source = source or HUB[name]
    local = Path(source).expanduser()
    repo, _, config = (str(local), "", "") if local.is_dir() else source.partition(":")
    hint = (f"pass a local file instead ([sft] {name}_train / settings.json eval.{name}_path, or "
            f"load_{name}('<path>'): {'JSONL' if name == 'gsm8k' else 'JSONL or a directory of .json files'})")
    try:
        import datasets  # heavy: loaded on first use

        rows = datasets.load_dataset(repo, config or None, split=split)
    except Exception as exc:  # noqa: BLE001 - any failure has the same remedy
        message = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        where = "the local dataset folder" if local.is_dir() else "the Hugging Face Hub"
        raise HubUnavailable(f"could not load {repo} (split {split!r}) from {where}: {message}; "
                           f"{hint}") from exc
    convert = _convert(name)
    return [convert(dict(row), i, f"{repo}:{split}:{i}") for i, row in enumerate(rows)]


def load_parquet(path: Path) -> list[tuple[str, dict]]:
    """(``file:row``, record) of every row of a parquet file (pyarrow comes with ``datasets``)."""
    try:
        import pyarrow.parquet as pq  # heavy: loaded on first use
    except ImportError:
        raise ValueError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # noqa: BLE001 - a broken file is one line naming it
        raise ValueError(f"{path}: not a readable parquet file ({type(exc).__name__})") from None
    return [(f"{path}:{i + 1}", row) for i, row in enumerate(table.to_pylist())]
