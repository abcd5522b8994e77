"""What 02_dedup removed, for a person to read: the largest near-duplicate groups, each the instruction that
was kept and the ones removed as its duplicates, with the layer that caught them and their cosine similarity.

``removed.jsonl`` names, for each removed item, the kept item it is most similar to (``duplicate_of``), the
layer (``exact``, ``minhash``, ``semantic``; ``decontam_*`` points at evaluation items, not at a kept one) and
the similarity (1.0 for an exact copy). A group is a kept item and everything removed in its name.
"""

from __future__ import annotations

from typing import Any, Iterable

from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.stages import DEDUP
from rleif_kit.core.tables import Note, missing, text_table

GROUPS = 2  # groups shown: the largest, and one more to see that it is not a one-off


def duplicate_groups(paths: RunPaths, pool: Iterable[dict], n: int = GROUPS) -> Any:
    """The ``n`` largest groups (ties: the higher top similarity, then the kept id), kept item first, then its
    duplicates most similar first. ``pool`` is what 02 read (seeds and evolutions: ``id``, ``text``, ``operator``)."""
    if not paths.dedup_removed.exists():
        return missing(paths.rel(paths.dedup_removed), DEDUP, "near-duplicate groups")
    groups: dict[str, list[dict]] = {}
    for r in read_jsonl(paths.dedup_removed):
        if not r["layer"].startswith("decontam"):
            groups.setdefault(r["duplicate_of"], []).append(r)
    if not groups:
        return Note(f"No near-duplicates: {paths.rel(paths.dedup_removed)} removes nothing in the name of a kept "
                    "instruction.")
    by_id = {r["id"]: r for r in pool}
    largest = sorted(groups.items(), key=lambda kv: (-len(kv[1]), -max(m["similarity"] for m in kv[1]), kv[0]))[:n]
    rows = []
    for kept, members in largest:
        rows.append(_row(kept, by_id.get(kept, {}), "kept", "—", None))
        for m in sorted(members, key=lambda m: (-m["similarity"], m["id"])):
            rows.append(_row(kept, by_id.get(m["id"], {}), "removed", m["layer"], m["similarity"], m["id"]))
    return text_table(rows, wrap=("text",))


def _row(group: str, record: dict, role: str, layer: str, similarity: float | None, rid: str | None = None) -> dict:
    return {"group": group, "role": role, "id": rid or group, "operator": record.get("operator", "—"),
            "layer": layer, "similarity": similarity, "text": record.get("text", "(text not found)")}


def dedup_example(paths: RunPaths, pool: Iterable[dict]) -> Any:
    """One item kept and one removed as its duplicate, with why: the removed one the embedding layer caught
    closest under an exact copy (the most instructive: a different text, the same instruction), else any."""
    if not paths.dedup_removed.exists():
        return missing(paths.rel(paths.dedup_removed), DEDUP, "near-duplicates")
    removed = [r for r in read_jsonl(paths.dedup_removed) if not r["layer"].startswith("decontam")]
    if not removed:
        return Note(f"No near-duplicates: {paths.rel(paths.dedup_removed)} removes nothing in the name of a kept "
                    "instruction.")
    pick = min(removed, key=lambda r: (r["similarity"] >= 1.0, -r["similarity"], r["id"]))
    by_id = {r["id"]: r for r in pool}
    why = ("an exact copy of the kept one" if pick["similarity"] >= 1.0 else
           f"{pick['layer']} layer: cosine similarity {pick['similarity']:.3f} to the kept one, at or above τ")
    rows = [{"": "kept", "id": pick["duplicate_of"], "why": "first of its group (seeds, then round by round)",
             "text": by_id.get(pick["duplicate_of"], {}).get("text", "(text not found)")},
            {"": "removed", "id": pick["id"], "why": why,
             "text": by_id.get(pick["id"], {}).get("text", "(text not found)")}]
    return text_table(rows, wrap=("text",))
