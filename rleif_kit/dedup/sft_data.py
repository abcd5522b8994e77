"""``02_dedup/sft.jsonl``: the step-by-step data, the kept evolved instructions and the open-domain sample.

Evolved answers are normalised to the world's format (``World.normalise_answer``; math: ``worlds/math/stepwise.py``);
those without a clear step
structure are rewritten into steps by the evolve model when an endpoint is configured.
"""

from __future__ import annotations

import random
from collections import Counter

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.models.loading import load_tokenizer
from rleif_kit.worlds.data import open_domain_sample, stepwise_rows
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import AnswerRejected
from rleif_kit.worlds.tiny_corpus import ensure_base_model


def evolved_rows(cfg: RunConfig, instructions: list[dict], settings=None) -> tuple[list[dict], list[dict]]:
    """Kept evolved instructions with answers, normalised to the step format; the rest set aside with reasons.

    Answers with no clear step structure are rewritten into steps by the evolve model when an
    endpoint is configured (openai backend), and kept when the rewrite keeps the final answer.
    """
    rows, rejected, unstructured, world = [], [], [], world_for(cfg)
    for r in instructions:
        if r.get("round", 0) == 0:
            continue  # seeds: already in the step-by-step dataset
        if not r.get("answer"):
            rejected.append({"id": r["id"], "reason": "no answer"})
            continue
        try:
            rows.append({"id": r["id"], "instruction": r["text"], "response": world.normalise_answer(r["answer"]),
                         **({"input": r["input"]} if r.get("input") else {})})
        except AnswerRejected as e:
            item = {"id": r["id"], "instruction": r["text"], "response": r["answer"], "reason": e.reason}
            (unstructured if e.reason == "no step structure" else rejected).append(item)
    if unstructured and settings is not None and cfg.evol_instruct.backend == "openai":
        rewritten = world.rewrite_answers(cfg, settings, unstructured)
        rows += [{**i, "response": rewritten[i["id"]]} for i in unstructured if rewritten.get(i["id"])]
        unstructured = [{**i, "reason": "rewrite failed"} for i in unstructured if not rewritten.get(i["id"])]
    rejected += unstructured
    return ([{k: r[k] for k in ("id", "instruction", "input", "response") if k in r} for r in rows],
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
    write_jsonl(paths.sft_rows, rows)
    write_jsonl(paths.sft_rejected, rejected)
    counts = {src: sum(r["source"] == src for r in rows) for src in ("stepwise", "evolved", "open_domain")}
    reasons = dict(Counter(r["reason"] for r in rejected).most_common())
    return ({"rows": len(rows), **counts, "evolved_rejected": len(rejected), "rejected_reasons": reasons,
             "lengths": token_lengths(cfg, rows)}, rows)


def token_lengths(cfg: RunConfig, rows: list[dict], sample: int = 2000) -> dict:
    """Prompt + response token lengths (a seeded sample) against ``[sft].max_seq_len``: what gets truncated."""
    tokenizer = load_tokenizer(ensure_base_model(cfg))
    picked = rows if len(rows) <= sample else random.Random(cfg.base.seed).sample(rows, sample)
    world = world_for(cfg)
    texts = [world.train_prompt(r["instruction"], cot=cfg.eval.cot_prompt, input=r.get("input") or "")
             + world.completion(r["response"]) for r in picked]
    lengths = sorted(len(ids) for ids in tokenizer(texts)["input_ids"])
    over = sum(n > cfg.sft.max_seq_len for n in lengths)
    return {"sampled": len(lengths), "mean": sum(lengths) / len(lengths) if lengths else 0.0,
            "p95": lengths[int(0.95 * (len(lengths) - 1))] if lengths else 0, "max": lengths[-1] if lengths else 0,
            "max_seq_len": cfg.sft.max_seq_len, "share_truncated": over / len(lengths) if lengths else 0.0}
