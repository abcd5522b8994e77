"""Build the SFT examples: the step-by-step data of ``[sft].dataset`` plus open-domain samples.

Every example is a ``prompt`` (the Alpaca / WizardMath prompt the evaluation uses) and a
``completion`` (the response), so the trainer puts the loss on the response only.
``[sft].dataset = "arith:N"`` draws N problems from the arithmetic world, with gold solutions except for the
``[arith].teacher_early_stop`` share of the longest problems (a teacher that stops one step early); its
held-out split is written once per run (``paths.arith_heldout``) and never trained on.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

from rleif_kit import arith
from rleif_kit.config import RunConfig
from rleif_kit.evaluation.prompts import math_prompt, sft_completion
from rleif_kit.jsonl import read_jsonl, write_jsonl
from rleif_kit.paths import RunPaths


class DataError(ValueError):
    pass


def load_instructions(path: Path, what: str) -> list[dict]:
    """``instruction``/``response`` records (``output`` is accepted for Alpaca-style files)."""
    if not path.exists():
        raise DataError(f"{what}: file not found: {path}")
    out = []
    for i, r in enumerate(read_jsonl(path)):
        response = r.get("response", r.get("output"))
        if not isinstance(r.get("instruction"), str) or not isinstance(response, str):
            raise DataError(f"{path}: record {i + 1} needs string fields 'instruction' and 'response' "
                            f"(has {sorted(r)})")
        out.append({"id": str(r.get("id", f"{path.stem}-{i:06d}")), "instruction": r["instruction"],
                    "response": response})
    return out


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
    when that file does not exist yet — built from GSM8k/MATH training data (``sft_build.py``)."""
    n = arith_size(cfg.sft.dataset)
    if n is not None:
        train, _ = arith_splits(cfg, paths, n)
        return [{"id": r["id"], "instruction": r["question"], "response": s}
                for r, s in zip(train, teacher_solutions(cfg, train))]
    path = cfg.resolve(cfg.sft.dataset)
    if not path.exists() and (cfg.sft.gsm8k_train or cfg.sft.math_train):
        from rleif_kit.sft_build import build_sft_dataset

        report = build_sft_dataset(cfg, settings)
        print(f"built {path}: kept {report['kept']} of {report['problems']} ({report['kept_share']:.0%}); "
              f"dropped: {report['dropped']}")
    return load_instructions(path, "[sft] dataset")


def evolved_rows(cfg: RunConfig, instructions: list[dict], settings=None) -> tuple[list[dict], list[dict]]:
    """Kept evolved instructions with answers, normalised to the step format; the rest set aside with reasons.

    Answers with no clear step structure are rewritten into steps by the evolve model when an
    endpoint is configured (openai backend), and kept when the rewrite keeps the final answer.
    """
    from rleif_kit.stepwise import NormaliseError, normalise_solution

    rows, rejected, unstructured = [], [], []
    for r in instructions:
        if r.get("round", 0) == 0:
            continue  # seeds: already in the step-by-step dataset
        if not r.get("answer"):
            rejected.append({"id": r["id"], "reason": "no answer"})
            continue
        try:
            rows.append({"id": r["id"], "instruction": r["text"], "response": normalise_solution(r["answer"])})
        except NormaliseError as e:
            item = {"id": r["id"], "instruction": r["text"], "response": r["answer"], "reason": e.reason}
            (unstructured if e.reason == "no step structure" else rejected).append(item)
    if unstructured and settings is not None and cfg.evol_instruct.backend == "openai":
        from rleif_kit.sft_build import rewrite_to_steps

        rewritten = rewrite_to_steps(cfg, settings, unstructured)
        rows += [{**i, "response": rewritten[i["id"]]} for i in unstructured if rewritten.get(i["id"])]
        unstructured = [{**i, "reason": "rewrite failed"} for i in unstructured if not rewritten.get(i["id"])]
    rejected += unstructured
    return ([{k: r[k] for k in ("id", "instruction", "response")} for r in rows],
            [{"id": r["id"], "reason": r["reason"]} for r in rejected])


def build_sft_file(cfg: RunConfig, paths: RunPaths, instructions: list[dict],
                   settings=None) -> tuple[dict, list[dict]]:
    """``02_dedup/sft.jsonl``: step-by-step data + kept evolved instructions + open-domain samples.

    Returns the report (rows per source, rejected answers, token lengths) and the rows written.
    """
    evolved, rejected = evolved_rows(cfg, instructions, settings)
    rows = ([{**r, "source": "stepwise"} for r in stepwise_rows(cfg, paths, settings)]
            + [{**r, "source": "evolved"} for r in evolved]
            + [{**r, "source": "open_domain"} for r in open_domain_sample(cfg)])
    d = paths.stage("02_dedup")
    write_jsonl(d / "sft.jsonl", rows)
    write_jsonl(d / "sft_rejected.jsonl", rejected)
    counts = {src: sum(r["source"] == src for r in rows) for src in ("stepwise", "evolved", "open_domain")}
    reasons = dict(Counter(r["reason"] for r in rejected).most_common())
    return ({"rows": len(rows), **counts, "evolved_rejected": len(rejected), "rejected_reasons": reasons,
             "lengths": token_lengths(cfg, rows)}, rows)


def token_lengths(cfg: RunConfig, rows: list[dict], sample: int = 2000) -> dict:
    """Prompt + response token lengths (a seeded sample) against ``[sft].max_seq_len``: what gets truncated."""
    from rleif_kit.models import ensure_base_model, load_tokenizer

    tokenizer = load_tokenizer(ensure_base_model(cfg))
    picked = rows if len(rows) <= sample else random.Random(cfg.base.seed).sample(rows, sample)
    texts = [math_prompt(r["instruction"], cot=cfg.eval.cot_prompt) + sft_completion(r["response"]) for r in picked]
    lengths = sorted(len(ids) for ids in tokenizer(texts)["input_ids"])
    over = sum(n > cfg.sft.max_seq_len for n in lengths)
    return {"sampled": len(lengths), "mean": sum(lengths) / len(lengths) if lengths else 0.0,
            "p95": lengths[int(0.95 * (len(lengths) - 1))] if lengths else 0, "max": lengths[-1] if lengths else 0,
            "max_seq_len": cfg.sft.max_seq_len, "share_truncated": over / len(lengths) if lengths else 0.0}


def build_sft_examples(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """Prompt/completion examples for SFT, shuffled with the run's seed, saved to ``paths.sft_data``.

    From ``02_dedup/sft.jsonl`` when 02_dedup has run; otherwise straight from ``[sft].dataset`` and
    the open-domain file, so SFT also runs on its own.
    """
    built = paths.output_dir / "02_dedup" / "sft.jsonl"
    if built.exists():
        rows = list(read_jsonl(built))
    else:
        rows = ([{**r, "source": "stepwise"} for r in stepwise_rows(cfg, paths)]
                + [{**r, "source": "open_domain"} for r in open_domain_sample(cfg)])
    cot = cfg.eval.cot_prompt
    examples = [{"id": r["id"], "source": r["source"], "prompt": math_prompt(r["instruction"], cot=cot),
                 "completion": sft_completion(r["response"])} for r in rows]
    random.Random(cfg.base.seed).shuffle(examples)
    write_jsonl(paths.sft_data, examples)
    return examples
