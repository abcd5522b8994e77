"""The data the stages hand each other: seeds, the arithmetic held-out split, the instruction pool, the
step-by-step SFT rows and the open-domain sample.

``[sft].dataset = "arith:N"`` draws N problems from the arithmetic world, with gold solutions except for the
``[arith].teacher_early_stop`` share of the longest problems (a teacher that stops one step early); its
held-out split is written once per run (``paths.arith_heldout``) and never trained on: 01 never draws a
seed from it, 03 and 05 measure on it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Iterator

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import UserFileError, read_jsonl, read_user_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.math.sft import build_sft_dataset


class DataError(ValueError):
    pass


def load_instructions(path: Path, what: str) -> list[dict]:
    """``instruction``/``response`` records (``output`` is accepted for Alpaca-style files), read strictly: every
    bad line, empty file or repeated id is an error naming it."""
    out, seen = [], {}
    try:
        for i, (where, r) in enumerate(read_user_jsonl(path, what)):
            response = r.get("response", r.get("output"))
            if not isinstance(r.get("instruction"), str) or not isinstance(response, str):
                raise DataError(f"{where}: needs string fields 'instruction' and 'response' (has {sorted(r)})")
            rid = _record_id(r, f"{path.stem}-{i:06d}", where)
            if rid in seen:
                raise DataError(f"{where}: id {rid!r} already used at line {seen[rid]}: ids must be unique")
            seen[rid] = where.rsplit(":", 1)[1]
            out.append({"id": rid, "instruction": r["instruction"], "response": response})
    except UserFileError as e:
        raise DataError(str(e)) from None
    if not out:
        raise DataError(f"{what}: {path} holds no records")
    return out


def _record_id(record: dict, default: str, where: str) -> str:
    rid = record.get("id", default)
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise DataError(f"{where}: 'id' must be a string or an integer, got {type(rid).__name__}")
    return str(rid)


def arith_size(dataset: str) -> int | None:
    """N for ``"arith:N"``, None for a file path."""
    if not dataset.startswith("arith:"):
        return None
    try:
        n = int(dataset.split(":", 1)[1])
    except ValueError:
        n = 0
    if n <= 0:
        raise DataError(f"[sft] dataset = {dataset!r}: expected 'arith:N' with N > 0")
    return n


def arith_splits(cfg: RunConfig, paths: RunPaths, train_n: int) -> tuple[list[dict], list[dict]]:
    """Train problems and the run's fixed held-out problems (disjoint by question text)."""
    train, heldout = arith.generate_splits(train_n, cfg.arith.heldout_size, seed=cfg.base.seed,
                                           min_steps=cfg.arith.min_steps, max_steps=cfg.arith.max_steps,
                                           max_operand=cfg.arith.max_operand)
    if not paths.arith_heldout.exists():
        write_jsonl(paths.arith_heldout, heldout)
    return train, heldout


def heldout_problems(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """The run's arithmetic held-out set (written on first use)."""
    if not paths.arith_heldout.exists():
        arith_splits(cfg, paths, train_n=1)
    return list(read_jsonl(paths.arith_heldout))


def open_domain_sample(cfg: RunConfig) -> list[dict]:
    """``[sft].open_domain_samples`` examples drawn (seeded) from ``[sft].open_domain_path``."""
    n = cfg.sft.open_domain_samples
    if n == 0:
        return []
    if not cfg.sft.open_domain_path:
        raise DataError(f"[sft] open_domain_samples = {n} but open_domain_path is empty")
    pool = load_instructions(cfg.resolve(cfg.sft.open_domain_path), "[sft] open_domain_path")
    if len(pool) < n:
        print(f"note: [sft] open_domain_samples = {n} but {cfg.sft.open_domain_path} has {len(pool)}; using all")
        return pool
    return random.Random(cfg.base.seed).sample(pool, n)


def teacher_solutions(cfg: RunConfig, train: list[dict]) -> list[str]:
    """The SFT solution of each generated problem: gold, except the seeded ``[arith].teacher_early_stop``
    share of ``max_steps``-step problems, whose teacher stops one step early (wrong final answer)."""
    rate, longest = cfg.arith.teacher_early_stop, cfg.arith.max_steps
    rng = random.Random(f"{cfg.base.seed}-teacher")
    out = []
    for r in train:
        wrong = longest >= 2 and r["n_steps"] == longest and rng.random() < rate
        out.append(arith.Problem.from_record(r).early_stop_solution() if wrong else r["solution"])
    return out


def stepwise_rows(cfg: RunConfig, paths: RunPaths, settings=None) -> list[dict]:
    """The step-by-step data of ``[sft].dataset``: generated (``arith:N``), read from its JSONL, or —
    when that file does not exist yet — built from GSM8k/MATH training data (``worlds/math/sft.py``)."""
    n = arith_size(cfg.sft.dataset)
    if n is not None:
        train, _ = arith_splits(cfg, paths, n)
        return [{"id": r["id"], "instruction": r["question"], "response": s}
                for r, s in zip(train, teacher_solutions(cfg, train))]
    path = cfg.resolve(cfg.sft.dataset)
    if not path.exists() and (cfg.sft.gsm8k_train or cfg.sft.math_train):
        report = build_sft_dataset(cfg, settings)
        print(f"built {path}: kept {report['kept']} of {report['problems']} ({report['kept_share']:.0%}); "
              f"dropped: {report['dropped']}")
    return load_instructions(path, "[sft] dataset")


def load_seeds(cfg: RunConfig, paths: RunPaths) -> Iterator[dict]:
    """Seed records ``{"id", "root_id", "round": 0, "text", ...}``, streamed from the seed source."""
    ev = cfg.evol_instruct
    limit = ev.max_seeds or None
    if ev.seeds.startswith("arith:"):
        yield from _arith_seeds(cfg, paths, int(ev.seeds.split(":", 1)[1]))[:limit]
        return
    path = cfg.resolve(ev.seeds)
    if not path.exists():
        raise FileNotFoundError(f"[evol_instruct] seeds = {ev.seeds!r}: file not found ({path}); `rleif data PARAMS` "
                                "(stage 00) builds it from [sft] gsm8k_train / math_train")
    seen: dict[str, str] = {}
    try:
        for i, (where, rec) in enumerate(read_user_jsonl(path, "[evol_instruct] seeds")):
            if limit is not None and i >= limit:
                return
            text = rec.get("instruction", rec.get("question", rec.get("text")))
            if not isinstance(text, str) or not text.strip():
                raise DataError(f"{where}: seed has no 'instruction' (or 'question', 'text') string")
            sid = _record_id(rec, f"seed-{i:06d}", where)
            if sid in seen:  # two lineages under one id would collapse into one
                raise DataError(f"{where}: seed id {sid!r} already used at line {seen[sid]}: ids must be unique")
            seen[sid] = where.rsplit(":", 1)[1]
            seed = {"id": sid, "root_id": sid, "round": 0, "text": text,
                    "answer": rec.get("response", rec.get("answer"))}
            seed.update({k: rec[k] for k in ("gold", "source") if rec.get(k) is not None})  # truth.is_correct reads them
            if "problem" in rec:  # an arithmetic-world record (e.g. the loop's previous 02_dedup/instructions.jsonl)
                seed["problem"] = rec["problem"]
            yield seed
    except UserFileError as e:
        raise DataError(str(e)) from None
    if not seen:
        raise DataError(f"[evol_instruct] seeds = {ev.seeds!r}: {path} holds no seeds")


def _arith_seeds(cfg: RunConfig, paths: RunPaths, n: int) -> list[dict]:
    """Arithmetic-world seeds, never one of the held-out problems."""
    heldout = {p["question"] for p in heldout_problems(cfg, paths)}
    problems = arith.generate_problems(n + len(heldout) // 10 + 10, seed=cfg.base.seed + 1, prefix="seed",
                                       min_steps=cfg.arith.min_steps, max_steps=cfg.arith.max_steps,
                                       max_operand=cfg.arith.max_operand)
    seeds = [p for p in problems if p["question"] not in heldout][:n]
    return [{"id": p["id"], "root_id": p["id"], "round": 0, "text": p["question"], "answer": p["solution"],
             "problem": p["problem"]} for p in seeds]


def instruction_pool(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """The evolved, deduplicated instructions (02_dedup), else the evolved ones, else the seeds."""
    path = paths.kept_instructions
    return list(read_jsonl(path)) if path is not None else list(load_seeds(cfg, paths))
