"""Evolution seeds from GSM8k and MATH training questions: deduplicated, decontaminated, each drop with its reason.

Why here and not in 01: Evol-Instruct starts from the training questions (the paper's 15k), and a seed that
repeats another or copies a test problem spoils everything evolved from it. So the seed file is built once,
before evolution, and every question it leaves out is written down with why (``00_setup/seeds_rejected.jsonl``).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from typing import Any, Iterable

from rleif_kit.core.overlap import NgramIndex

CONTAMINATED = "shares a word n-gram ([dedup] decontam_ngram) with an evaluation item"


def _key(text: str) -> str:
    """Exact-duplicate key: case, spacing and a trailing full stop do not make two questions different; operators
    and LaTeX do ("Compute $5+3$." is not "Compute $5-3$.")."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split()).rstrip(" .!?")


def build_seeds(problems: Iterable[dict], eval_items: Iterable[tuple[str, str]] = (),
                n: int = 13) -> tuple[list[dict], list[dict]]:
    """(seeds, rejected) from training problems ``{"id", "question", "solution", "gold", "source"}``.

    A question whose normalised text repeats an earlier one is rejected ("duplicate of <id>"); one that shares a
    ``n``-word sequence (``[dedup] decontam_ngram``, 13 by default) with an evaluation item (``(eval id, text)``
    pairs) is rejected. Seeds keep ``id``, ``instruction``, ``answer`` (the gold solution), ``gold`` and ``source``.
    """
    eval_items = list(eval_items)
    index = NgramIndex(eval_items, n=n)
    copies = {_key(text): eid for eid, text in eval_items}  # exact copies, however short (n-grams need 8 words)
    seen: dict[str, str] = {}
    seeds, rejected = [], []
    for p in problems:
        key = _key(p["question"])
        if not key:
            rejected.append({"id": p["id"], "reason": "empty question"})
            continue
        if key in seen:
            rejected.append({"id": p["id"], "reason": "duplicate question", "of": seen[key]})
            continue
        seen[key] = p["id"]
        hits = ([copies[key]] if key in copies else []) or (index.hits(p["question"]) if len(index) else [])
        if hits:
            rejected.append({"id": p["id"], "reason": CONTAMINATED, "eval_ids": hits[:5]})
            continue
        seeds.append({"id": p["id"], "instruction": p["question"], "answer": p.get("solution"), "gold": p.get("gold"),
                      "source": p.get("source")})
    return seeds, rejected


def reasons(rejected: Iterable[dict[str, Any]]) -> dict[str, int]:
    """Rejected rows counted by reason, most common first."""
    return dict(Counter(r["reason"] for r in rejected).most_common())
