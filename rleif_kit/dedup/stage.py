"""Stage 02: deduplicate and decontaminate the evolved instructions; report template diversity.

Reads ``01_evolve/evolved.jsonl`` (plus the seeds), removes exact copies, optional MinHash near
copies and semantic near-duplicates (cosine >= ``[evol_instruct].dedup_threshold``), then anything
that overlaps an evaluation set. Writes ``instructions.jsonl`` (kept), ``removed.jsonl`` (each with
the id it duplicates, the similarity and the layer that caught it) and ``dedup_report.json``.

Why it matters: an IRM trained on a set dominated by a few evolution templates learns the templates,
and PPO's reward then inflates. MiniLM barely tells numbers apart, so two problems that differ only
in their numbers count as duplicates here — on purpose: a reward model learns nothing from a number
swap. Raise the threshold to keep them.

    python -m rleif_kit.dedup --params params/tiny-cpu.toml
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rleif_kit.checks.verdicts import (
    Verdict,
    check_evolve_temperature,
    check_kept_floor,
    check_operator_share,
    check_step_format,
    format_verdicts,
)
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_counts, plot_similarity_histogram, save_figure
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import DEDUP, EVOLVE
from rleif_kit.core.tables import count_table
from rleif_kit.dedup.decontam import NgramIndex, decontaminate
from rleif_kit.dedup.embeddings import Embedder
from rleif_kit.dedup.groups import dedup_example, duplicate_groups
from rleif_kit.dedup.near_duplicates import dedup
from rleif_kit.dedup.sft_data import build_sft_file
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import load_seeds
from rleif_kit.worlds.intros import stage_intro

# The stage's public face: what its notebook and ``python -m rleif_kit.dedup`` use. The near-duplicate groups
# (dedup/groups.py), the per-operator counts (core/tables.py), the plots (core/plots.py) and the verdicts' text
# (checks/verdicts.py) are defined there and offered here, so that the notebook reads one stage module.
__all__ = ["stage_intro", "DedupStageResult", "run_dedup", "load_pool", "count_table", "duplicate_groups",
           "plot_similarity_histogram", "plot_counts", "save_figure", "format_verdicts", "dedup_example"]


@dataclass
class DedupStageResult:
    total: int
    kept: int
    removed_by_layer: dict[str, int]
    per_operator: dict[str, dict[str, int]]
    per_round: dict[str, dict[str, int]]
    clusters: list[dict]
    similarities: list[float]
    contaminated: int
    contaminated_items: list[dict] = field(default_factory=list)  # id, the eval ids it overlaps, method
    sft: dict = field(default_factory=dict)  # rows per source in 02_dedup/sft.jsonl, rejected answers
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def removed_share(self) -> float:
        return 1 - self.kept / self.total if self.total else 0.0


def load_pool(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """Seeds first, then the kept evolutions round by round: the order 'first seen' refers to."""
    evolved_path = paths.evolved
    if not evolved_path.exists():
        raise FileNotFoundError(f"{DEDUP} needs {evolved_path}: run {EVOLVE} first")
    evolved = sorted(read_jsonl(evolved_path), key=lambda r: (r["round"], r["id"]))
    seeds = [{**s, "operator": "seed", "direction": "seed"} for s in load_seeds(cfg, paths)]
    return seeds + evolved


def eval_items(cfg: RunConfig, paths: RunPaths, settings: Any = None) -> list[tuple[str, str]]:
    """(eval id, text) of every evaluation item the training data must not contain."""
    items: list[tuple[str, str]] = []
    items += world_for(cfg).decontamination_items(cfg, paths)  # the run's own held-out split (arith)
    files = [cfg.resolve(p) for p in cfg.dedup.eval_paths]
    if settings is not None:
        files += [cfg.resolve(p) for p in (settings.eval.gsm8k_path, settings.eval.math_path) if p]
    for path in files:
        if not path.exists():
            print(f"note: decontamination skips {path}: file not found")
            continue
        for i, r in enumerate(read_jsonl(path)):
            text = r.get("question") or r.get("problem") or r.get("instruction")
            if text:
                items.append((str(r.get("id", f"{path.stem}-{i}")), text))
    return items


def _breakdown(pool: list[dict], removed_ids: set[str]) -> tuple[dict, dict]:
    per_operator: dict[str, Counter] = {}
    per_round: dict[str, Counter] = {}
    for r in pool:
        kind = "removed" if r["id"] in removed_ids else "kept"
        for table, key in ((per_operator, r.get("operator", "seed")), (per_round, str(r.get("round", 0)))):
            table.setdefault(key, Counter(**{"in": 0}))
            table[key]["in"] += 1
            table[key][kind] += 1
    return ({k: dict(v) for k, v in sorted(per_operator.items())},
            {k: dict(v) for k, v in sorted(per_round.items(), key=lambda kv: int(kv[0]))})


def _clusters(removals: list[dict], by_id: dict[str, dict], top: int = 5) -> list[dict]:
    """The largest near-duplicate groups: the survivor, how many it absorbed, and one example."""
    groups: dict[str, list[dict]] = {}
    for r in removals:
        if not r["layer"].startswith("decontam"):  # those point at evaluation items, not at kept ones
            groups.setdefault(r["duplicate_of"], []).append(r)
    largest = sorted(groups.items(), key=lambda kv: -len(kv[1]))[:top]
    return [{"survivor": sid, "size": len(members) + 1, "survivor_text": by_id[sid]["text"][:200],
             "example_duplicate": by_id[members[0]["id"]]["text"][:200],
             "max_similarity": max(m["similarity"] for m in members)} for sid, members in largest]


def _decontaminate(cfg: RunConfig, paths: RunPaths, settings: Any, embedder: Any, ids: list[str],
                   texts: list[str]) -> list[dict]:
    """Items sharing a long n-gram (or, optionally, an embedding) with an evaluation item."""
    evals = eval_items(cfg, paths, settings)
    index = NgramIndex(evals, n=cfg.dedup.decontam_ngram)
    embed_check = None
    if cfg.dedup.decontam_embedding and index.eval_ids:  # paraphrased test items that share no n-gram
        eval_text = dict(evals)
        embed_check = (embedder.embed(texts), embedder.embed([eval_text[e] for e in index.eval_ids]),
                       cfg.dedup.decontam_threshold)
    return decontaminate(ids, texts, index, embed_check)


def _verdicts(cfg: RunConfig, paths: RunPaths, kept: int, per_operator: dict,
              sft_responses: list[str]) -> list[Verdict]:
    kept_ops = {op: c.get("kept", 0) for op, c in per_operator.items() if op != "seed"}
    return [check_evolve_temperature(cfg.evol_instruct.temperature, cfg.diagnostics),
            check_kept_floor(kept, cfg.dedup.min_kept, cfg.evol_instruct.evolve_up_ratio,
                             paths.rel(paths.dedup_instructions)),
            check_operator_share(kept_ops, cfg.diagnostics, source=paths.rel(paths.dedup_report),
                                 drawn_per_operator={op: c.get("in", 0) for op, c in per_operator.items()
                                                     if op != "seed"}),
            check_step_format(sft_responses, cfg.diagnostics, seed=cfg.base.seed, source=paths.rel(paths.sft_rows),
                              world=world_for(cfg))]


def run_dedup(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> DedupStageResult:
    """Dedup (exact → MinHash → semantic), decontaminate, build the SFT data, report."""
    dd = cfg.dedup
    pool = load_pool(cfg, paths)
    ids, texts = [r["id"] for r in pool], [r["text"] for r in pool]
    embedder = Embedder(dd.embedding_model, cache_path=paths.embedding_cache)
    out = dedup(ids, texts, embedder, threshold=cfg.evol_instruct.dedup_threshold,
                scores=[r.get("score") for r in pool] if dd.survivor == "quality" else None,
                survivor=dd.survivor, lexical=dd.lexical, minhash=dd.minhash, block_size=dd.block_size,
                minhash_threshold=dd.minhash_threshold, use_faiss=dd.use_faiss, progress=progress)
    removals = [{"id": r.id, "duplicate_of": r.duplicate_of, "similarity": round(float(r.similarity), 4),
                 "layer": r.layer} for r in out.removals]
    kept_idx = sorted(out.kept)
    hits = _decontaminate(cfg, paths, settings, embedder, [ids[i] for i in kept_idx], [texts[i] for i in kept_idx])
    removals += [{"id": h["id"], "duplicate_of": ",".join(h["eval_ids"][:3]), "similarity": h.get("similarity", 1.0),
                  "layer": "decontam_" + h["method"]} for h in hits]
    contaminated = {h["id"] for h in hits}
    kept = [pool[i] for i in kept_idx if ids[i] not in contaminated]
    write_jsonl(paths.dedup_instructions, kept)
    write_jsonl(paths.dedup_removed, removals)
    per_operator, per_round = _breakdown(pool, {r["id"] for r in removals})
    sft, sft_rows = build_sft_file(cfg, paths, kept, settings)
    sft_responses = [r["response"] for r in sft_rows if r["source"] != "open_domain"]
    result = DedupStageResult(
        total=len(pool), kept=len(kept), removed_by_layer=dict(Counter(r["layer"] for r in removals)),
        per_operator=per_operator, per_round=per_round, clusters=_clusters(removals, {r["id"]: r for r in pool}),
        similarities=[float(s) for s in out.similarities], contaminated=len(contaminated), sft=sft,
        contaminated_items=[{"id": h["id"], "eval_ids": h["eval_ids"][:5], "method": h["method"]} for h in hits],
        verdicts=_verdicts(cfg, paths, len(kept), per_operator, sft_responses))
    _write_report(paths.dedup_report, result, cfg, embedder)
    return result


def _write_report(path: Path, result: DedupStageResult, cfg: RunConfig, embedder: Any) -> None:
    report = {k: v for k, v in result.__dict__.items() if k not in ("similarities", "verdicts")}
    report.update(removed_share=result.removed_share, embedded=embedder.computed, embedding_cache_hits=embedder.cached,
                  threshold=cfg.evol_instruct.dedup_threshold, verdicts=[v.to_dict() for v in result.verdicts],
                  numbers_note="MiniLM barely tells numbers apart: problems differing only in numbers count as "
                               "duplicates (a reward model learns nothing from a number swap).")
    write_json_atomic(path, report)
