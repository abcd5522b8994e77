"""What 04_reward_models learns from, for a person to read: one sibling set with its ranking and the preference
pairs the ranking became (IRM), and solutions with the trained PRM's score of each step (PRM).

The IRM side reads the fan-out (``irm_fanout.jsonl``: every sibling with its operator and outcome) and the
ranking behind it: the judge's (``irm_rankings.jsonl``) or, on a programmatic world (arith, tiny_code), the
world's judge's quality score (``World.sibling_quality``). The pairs actually kept — after deduplication and the
operator balance — come from ``irm_pairs.jsonl`` where the stage saved them, else from the pairs the notebook holds.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.core.tables import Note, missing, text_table
from rleif_kit.rewards.irm_data import pairs_from_scores, programmatic_judge
from rleif_kit.rewards.judge_labels import ranking_pairs
from rleif_kit.rewards.reward import aggregate_steps, solution_step_ends, step_scores
from rleif_kit.rewards.rm_datasets import split_by_group, split_by_question
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import instruction_pool
from rleif_kit.worlds.words import run_words

SOLUTIONS = 2  # one with a wrong step, one right throughout: the contrast the PRM must draw
FENCE_ONLY = re.compile(r"^```[\w+-]*$")  # "```python" or "```" alone: a code block's fence, not a step


# ------------------------------------------------------------------ IRM: a ranked sibling set

def _rankings(cfg: RunConfig, paths: RunPaths, groups: dict[str, list[dict]]) -> dict[str, dict]:
    """Per sibling group: ``{"rank": {id: position}, "score": {id: quality} | None, "pairs": produced pairs}``."""
    out = {}
    world = world_for(cfg)
    if programmatic_judge(cfg, world):
        for gid, siblings in groups.items():
            scores = [world.sibling_quality(cfg, r) for r in siblings]
            levels = sorted(set(scores), reverse=True)  # equal quality, equal rank: no preference between them
            out[gid] = {"rank": {r["id"]: levels.index(s) + 1 for r, s in zip(siblings, scores)},
                        "score": dict(zip((r["id"] for r in siblings), scores)),
                        "pairs": pairs_from_scores(siblings, scores)}
        return out
    judged = {r["id"]: r for r in read_jsonl(paths.irm_rankings)} if paths.irm_rankings.exists() else {}
    for gid, siblings in groups.items():
        record = judged.get(gid)
        if record and record.get("status") == "ok":
            ranking = record["label"]
            out[gid] = {"rank": {i: ranking.index(i) + 1 for i in ranking}, "score": None,
                        "pairs": ranking_pairs(siblings, ranking)}
    return out


def _balanced(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict] | None) -> tuple[set | None, dict[str, str]]:
    """The pairs kept by the operator balance, as (chosen id, rejected id), and each sibling group's split (``train``
    / ``heldout``): from ``pairs`` when given (split as ``train_irm`` splits them), else from ``irm_pairs.jsonl``
    where the stage saved it. (None, {}) when neither is there, or the file predates the ids' ``chosen_id`` /
    ``rejected_id`` (04 rewrites it when it trains the IRM again)."""
    saved = paths.rm_rows("irm")
    if pairs is None and saved.exists():  # pairs given: this run's, the file may be an older run's
        rows = list(read_jsonl(saved))
        if any("chosen_id" not in p for p in rows):
            return None, {}
        split = {str(p["group"]): p["split"] for p in rows if "split" in p}
    elif pairs is not None:
        rows = list(pairs)
        train, held = split_by_group(rows, cfg.reward_model.rm_heldout_share, cfg.base.seed)
        split = {**{str(p["group"]): "train" for p in train}, **{str(p["group"]): "heldout" for p in held}}
    else:
        return None, {}
    return {(p["chosen_id"], p["rejected_id"]) for p in rows}, split


SPLIT_USE = {"train": "the IRM trains on this set",
             "heldout": "held out: the IRM's pairwise accuracy is measured on it"}


def _pair_rows(produced: list[dict], rank: dict[str, int], operator: dict[str, str], kept: set | None) -> list[dict]:
    """The pairs best first (by the chosen one's rank, then the rejected one's), with whether the balance kept each."""
    label = {r: f"{rank[r]}. {operator[r]}" for r in rank}
    return [{"chosen (rank. operator)": label[p["chosen_id"]], "rejected (rank. operator)": label[p["rejected_id"]],
             **({} if kept is None else {"kept": "yes" if (p["chosen_id"], p["rejected_id"]) in kept
                                         else "no: dropped by the operator balance"})}
            for p in sorted(produced, key=lambda p: (rank[p["chosen_id"]], rank[p["rejected_id"]]))]


def ranked_siblings(cfg: RunConfig, paths: RunPaths, pairs: Sequence[dict] | None = None) -> tuple[Any, Any]:
    """(the sibling set, its pairs): the group whose ranking made the most pairs (ties: the group id).

    The first table is the parent and its siblings best first — rank, operator, outcome of the evolution, the
    quality score where the judge is programmatic. The second is every (chosen, rejected) pair the ranking
    implies (k ranked siblings give k(k-1)/2, minus ties), best first, and whether the operator balance kept it
    (``pairs``: what ``build_irm_pairs`` returned, read from ``irm_pairs.jsonl`` when that exists); the caption says
    whether the IRM trains on the set or holds it out."""
    if not paths.irm_fanout.exists():
        note = missing(paths.rel(paths.irm_fanout), REWARD_MODELS, "sibling sets")
        return note, note
    groups: dict[str, list[dict]] = {}
    for r in read_jsonl(paths.irm_fanout):
        groups.setdefault(r["sibling_group"], []).append(r)
    groups = {g: sorted(s, key=lambda r: r["id"]) for g, s in groups.items()}
    ranked = _rankings(cfg, paths, groups)
    if not ranked:
        note = Note(f"No sibling set of {paths.rel(paths.irm_fanout)} was ranked (no ranking in "
                    f"{paths.rel(paths.irm_rankings)}): no preference pairs to show.")
        return note, note
    gid = min(ranked, key=lambda g: (-len(ranked[g]["pairs"]), g))
    rank, score, produced = ranked[gid]["rank"], ranked[gid]["score"], ranked[gid]["pairs"]
    siblings = sorted((r for r in groups[gid] if r["id"] in rank), key=lambda r: (rank[r["id"]], r["id"]))
    parent = next((r["text"] for r in instruction_pool(cfg, paths) if r["id"] == gid), "(text not found)")
    rows = [{"rank": "parent", "id": gid, "operator": "—", "outcome": "—", **({"quality": "—"} if score else {}),
             "text": parent}]
    rows += [{"rank": str(rank[r["id"]]), "id": r["id"], "operator": r["operator"],
              "outcome": "kept" if r.get("kept", True) else f"eliminated: {r.get('reason', '?')}",
              **({"quality": score[r["id"]]} if score else {}), "text": r["text"]} for r in siblings]
    kept, split = _balanced(cfg, paths, pairs)
    pair_rows = _pair_rows(produced, rank, {r["id"]: r["operator"] for r in siblings}, kept)
    who = run_words(cfg).judge  # the world's programmatic judge (its quality formula) or the judge model
    caption = (f"{len(siblings)} siblings of {gid}, ranked by {who}: {len(produced)} preference pairs"
               + ("" if kept is None else f", {sum(r['kept'] == 'yes' for r in pair_rows)} kept by the operator "
                                          "balance")
               + (f"; {SPLIT_USE[split[gid]]}" if split.get(gid) in SPLIT_USE else ""))
    return text_table(rows, wrap=("text",), caption=caption), text_table(pair_rows)


# ------------------------------------------------------------------ PRM: per-step scores

def labelled_steps(examples: Sequence[dict]) -> tuple[int, float]:
    """(steps labelled, share of them labelled correct) over the PRM's examples; (0, 0.0) for none."""
    labels = [label for e in examples for label in e["labels"]]
    return len(labels), sum(labels) / max(1, len(labels))


def step_rows(example: dict, scores: Sequence[float], how: str, world: Any = None) -> list[dict]:
    """One row per step of ``example`` (question, solution, labels) as ``world`` splits it (a math world: its
    sentences; a code world: statement blocks): its text, its label and the PRM score, after a first row with the
    question and rA, the aggregate of the scores by ``how``. A step that is only a code fence line is no step to
    show (its score is still in rA)."""
    text = example["solution"]
    ends = solution_step_ends(text) if world is None else solution_step_ends(text, world)
    starts = [0] + ends[:-1]
    head = {"solution": example["id"], "step": "question", "text": example["question"],
            "label": f"rA = {how} of the steps", "PRM score": aggregate_steps(scores, how)}
    return [head] + [{"solution": example["id"], "step": str(i), "text": text[a:b].strip(),
                      "label": "correct" if ok else "wrong", "PRM score": s}
                     for i, (a, b, ok, s) in enumerate(zip(starts, ends, example["labels"], scores), 1)
                     if not FENCE_ONLY.match(text[a:b].strip())]


def _pick(examples: Sequence[dict], n: int) -> list[dict]:
    """The first solution (by id) with a wrong step, then the first right throughout, up to ``n``."""
    ordered = sorted(examples, key=lambda e: e["id"])
    wrong = [e for e in ordered if not all(e["labels"])][:1]
    right = [e for e in ordered if all(e["labels"])][:1]
    rest = [e for e in ordered if e not in wrong + right]
    return (wrong + right + rest)[:n]


def prm_step_table(cfg: RunConfig, model: Any, tokenizer: Any, examples: Sequence[dict], n: int = SOLUTIONS) -> Any:
    """Held-out solutions (questions the PRM never trained on) with the trained PRM's P(step correct) per step,
    coloured red (wrong) to green (right), beside the step labels it learned from."""
    rm = cfg.reward_model
    heldout = split_by_question(examples, rm.rm_heldout_share, cfg.base.seed)[1]  # all of them, as train_prm splits
    world = world_for(cfg)
    usable = [e for e in heldout
              if e.get("labels") and len(solution_step_ends(e["solution"], world)) == len(e["labels"])]
    if not usable:
        return Note(f"No held-out solution with findable steps among the {len(examples)} PRM examples: nothing to "
                    "show.")
    picked = _pick(usable, n)
    scores = step_scores(model, tokenizer, [(e["question"], e["solution"]) for e in picked], max_len=rm.rm_max_len,
                         world=world)
    rows = [row for e, s in zip(picked, scores) if s is not None
            for row in step_rows(e, s, rm.prm_aggregate, world)]
    if not rows:
        return Note(f"The PRM could not score the picked solutions (cut at rm_max_len = {rm.rm_max_len}).")
    return text_table(rows, wrap=("text",), gradient=("PRM score",), code=("text",) if world.code_language else (),
                      caption=f"P(step correct) at the last token of each step; rA = {rm.prm_aggregate} over the steps")


# ------------------------------------------------------------------ one example of each training set

def reward_example(cfg: RunConfig, paths: RunPaths) -> tuple[Any, Any]:
    """What each reward model learns from, one example each: a preference pair the IRM trains on (its first train
    pair in ``irm_pairs.jsonl``) and one labelled solution the PRM trains on (the first with a wrong step in
    ``prm_steps.jsonl``, else the first), step by step as the world splits it."""
    words = run_words(cfg)
    return _pair_example(paths, words), _steps_example(paths, words)


def _pair_example(paths: RunPaths, words: Any) -> Any:
    path = paths.rm_rows("irm")
    if not path.exists():
        return missing(paths.rel(path), REWARD_MODELS, "preference pairs")
    pairs = list(read_jsonl(path))
    pair = next((p for p in pairs if p.get("split") == "train"), pairs[0] if pairs else None)
    if pair is None:
        return Note(f"{paths.rel(path)} is empty: no preference pair to show.")
    if "chosen_id" not in pair:  # written before TRL's names: ids in chosen / rejected, not the texts
        return Note(f"{paths.rel(path)} was written by an older kit (ids in chosen / rejected): rerun 04 to see one.")
    rows = [{"": "preferred (chosen)", "instruction": pair["chosen"]},  # TRL's preference format: the texts
            {"": "rejected", "instruction": pair["rejected"]}]
    return text_table(rows, wrap=("instruction",),
                      caption=f"IRM: rI(chosen) should come out above rI(rejected); ranked by {words.judge}")


def _steps_example(paths: RunPaths, words: Any) -> Any:
    path = paths.rm_rows("prm")
    if not path.exists():
        return missing(paths.rel(path), REWARD_MODELS, "labelled steps")
    examples = [e for e in read_jsonl(path) if len(e.get("completions") or []) == len(e.get("labels") or [None])]
    example = next((e for e in examples if not all(e["labels"])), examples[0] if examples else None)
    if example is None:
        return Note(f"{paths.rel(path)} holds no solution whose steps match its labels: nothing to show.")
    rows = [{"step": "question", "text": example["prompt"], "label": "—"}]  # TRL's stepwise format: the steps
    rows += [{"step": str(i), "text": step, "label": "correct" if ok else "wrong"}  # are its completions
             for i, (step, ok) in enumerate(zip(example["completions"], example["labels"]), 1)
             if not FENCE_ONLY.match(step.strip())]
    return text_table(rows, wrap=("text",), code=("text",) if words.code_language else (),
                      caption=f"PRM: one solution's steps with the labels it trains on ({example.get('source')})")
