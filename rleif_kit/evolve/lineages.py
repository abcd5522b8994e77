"""What 01_evolve made, for a person to read: a few lineages from their seed round by round, and one
eliminated evolution per reason next to the parent it failed to improve.

Every evolved record names its ``parent_id`` and ``root_id`` (the seed), so a lineage is the seed and its
records in round order. An eliminated evolution is part of its lineage too: the lineage kept its parent, and
the next round evolved that parent again. Tables go through ``core/tables.py`` (wrapped text, or a note when
the stage wrote nothing).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import EVOLVE
from rleif_kit.core.tables import Note, missing, text_table

LINEAGES = 3  # lineages shown: enough to see up and down moves, few enough to read
CLIP = 600  # characters of an eliminated text shown: a leaked template can run to pages


def _clip(text: str | None, limit: int = CLIP) -> str:
    text = text or ""
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def _outcome(record: dict) -> str:
    return f"eliminated: {record['reason']}" if "reason" in record else "kept"


def _order(lineage: list[dict]) -> tuple:
    """Lineages that moved both up and down come first, then the longest; then by seed id (a fixed choice)."""
    kept = [r for r in lineage if "reason" not in r]
    return -len({r["direction"] for r in kept}), -len(kept), lineage[0]["root_id"]


def _choose(lineages: list[list[dict]], n: int) -> list[list[dict]]:
    """The first ``n - 1`` by :func:`_order`, then the first further one with an eliminated round (a lineage that
    kept its parent), else the next one."""
    ordered = sorted(lineages, key=_order)
    rest = ordered[n - 1:]
    last = next((lineage for lineage in rest if any("reason" in r for r in lineage)), rest[0] if rest else None)
    return ordered[:n - 1] + ([last] if last else [])


def lineage_table(paths: RunPaths, seeds: Iterable[dict], n: int = LINEAGES) -> Any:
    """``n`` lineages (those that moved up and down and got furthest, and one with an eliminated round), each the
    seed, then each round's evolution with its operator, direction and outcome (kept, or eliminated with the
    reason: the lineage then keeps its parent)."""
    if not paths.evolved.exists():
        return missing(paths.rel(paths.evolved), EVOLVE, "evolved instructions")
    records = list(read_jsonl(paths.evolved))
    records += list(read_jsonl(paths.eliminated)) if paths.eliminated.exists() else []
    by_root: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: (r["round"], r["id"])):
        by_root.setdefault(r["root_id"], []).append(r)
    if not by_root:
        return Note(f"{paths.rel(paths.evolved)} holds no evolutions: nothing to show.")
    seed_of = {s["root_id"]: s for s in seeds}
    rows = []
    for lineage in _choose(list(by_root.values()), n):
        root = lineage[0]["root_id"]
        if root in seed_of:
            rows.append({"lineage": root, "round": 0, "operator": "seed", "direction": "—", "outcome": "seed",
                         "text": seed_of[root]["text"]})
        rows += [{"lineage": root, "round": r["round"], "operator": r["operator"], "direction": r["direction"],
                  "outcome": _outcome(r), "text": _clip(r["text"])} for r in lineage]
    return text_table(rows, wrap=("text",))


def elimination_table(paths: RunPaths, seeds: Iterable[dict]) -> Any:
    """One eliminated evolution per reason (the most common reason first; within one, the first by id), with
    the parent it was evolved from: what the elimination rules caught, and why."""
    if not paths.eliminated.exists():
        return missing(paths.rel(paths.eliminated), EVOLVE, "eliminated evolutions")
    dropped = sorted(read_jsonl(paths.eliminated), key=lambda r: r["id"])
    if not dropped:
        return Note(f"No evolution was eliminated ({paths.rel(paths.eliminated)} is empty).")
    texts = {s["id"]: s["text"] for s in seeds}
    if paths.evolved.exists():
        texts.update((r["id"], r["text"]) for r in read_jsonl(paths.evolved))
    counts = Counter(r["reason"] for r in dropped)
    first = {}
    for r in dropped:
        first.setdefault(r["reason"], r)
    rows = [{"reason": reason, "times": count, "round": first[reason]["round"],
             "operator": first[reason]["operator"],
             "parent": _clip(texts.get(first[reason]["parent_id"], f"({first[reason]['parent_id']}: text not found)")),
             "evolved (eliminated)": _clip(first[reason]["text"])}
            for reason, count in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    return text_table(rows, wrap=("parent", "evolved (eliminated)"))


def evolve_example(paths: RunPaths, seeds: Iterable[dict]) -> Any:
    """One seed going in and its first kept evolution coming out (the lowest round, then id), with the operator
    that rewrote it and its direction."""
    if not paths.evolved.exists():
        return missing(paths.rel(paths.evolved), EVOLVE, "evolved instructions")
    seed_of = {s["id"]: s for s in seeds}
    child = next((r for r in sorted(read_jsonl(paths.evolved), key=lambda r: (r["round"], r["id"]))
                  if r.get("parent_id") in seed_of), None)
    if child is None:
        return Note(f"{paths.rel(paths.evolved)} holds no evolution of a seed: nothing to show.")
    parent = seed_of[child["parent_id"]]
    rows = [{"": "seed (in)", "id": parent["id"], "operator": "—", "text": parent["text"]},
            {"": "evolved (out)", "id": child["id"], "operator": f"{child['operator']} ({child['direction']})",
             "text": child["text"]}]
    return text_table(rows, wrap=("text",))
