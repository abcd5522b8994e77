"""Decontamination: find training instructions that overlap the evaluation sets.

Why: a reproduction that trains on its test set proves nothing.  Evol-Instruct starts from the
GSM8k/MATH *train* splits, but an evolution model that has memorised the test split can write a
test problem back out, and a seed file can be mixed up.  So every instruction is checked against
the eval items before SFT and reward-model training:

* n-gram layer (the GPT-3 paper's recipe): an item is contaminated when it shares at least one
  13-word sequence with an eval item.  Words are lower-cased with punctuation stripped, so
  formatting differences do not hide a copy.  13 words is long enough that two different math
  problems almost never share one by chance ("how many apples does she have left" is 7).
* Short eval items (fewer than 13 words) would have no 13-gram at all and so no protection: an
  eval item of 8-12 words is used whole, as one "n-gram", and a training text containing that
  word sequence anywhere is a hit.  Items under 8 words are skipped — a phrase that short ("what
  is 7 times 8") is too common to call a copy.  A training text under 13 words is matched only
  against eval items of its own length or shorter (its own 13-grams do not exist).
* embedding layer (optional): cosine similarity of MiniLM vectors >= a threshold catches
  paraphrased copies; computed in blocks, like the semantic dedup, never as a full n×m matrix
  at once.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from rleif_kit.dedup.embeddings import unit_rows
from rleif_kit.core.overlap import MIN_WORDS, NgramIndex, word_ngrams

__all__ = ["MIN_WORDS", "word_ngrams", "NgramIndex", "decontaminate"]

_EPS = 1e-6  # float32 slack on the threshold comparison, as in rleif_kit.dedup.near_duplicates
_BLOCK = 1024  # items per block in the embedding layer: block × eval floats at a time


def decontaminate(ids: Sequence, texts: Sequence[str], index: NgramIndex,
                  embed_check: tuple[np.ndarray, np.ndarray, float] | None = None) -> list[dict]:
    """One dict per contaminated item, in input order.

    ``{"index", "id", "eval_ids", "method": "ngram"}`` for an n-gram hit; with ``embed_check =
    (item_vectors, eval_vectors, threshold)``, an item without an n-gram hit whose cosine
    similarity to some eval item is >= threshold gives ``{..., "method": "embedding",
    "similarity": max cosine}`` (its ``eval_ids`` ordered most similar first).
    """
    if len(ids) != len(texts):
        raise ValueError(f"{len(ids)} ids for {len(texts)} texts: they must align one to one")
    found: dict[int, dict] = {}
    for i, text in enumerate(texts):
        eval_ids = index.hits(text)
        if eval_ids:
            found[i] = {"index": i, "id": str(ids[i]), "eval_ids": eval_ids, "method": "ngram"}
    if embed_check is not None:
        for i, eval_ids, sim in _embedding_hits(embed_check, index.eval_ids, len(texts)):
            if i not in found:
                found[i] = {"index": i, "id": str(ids[i]), "eval_ids": eval_ids, "method": "embedding",
                            "similarity": sim}
    return [found[i] for i in sorted(found)]


def _embedding_hits(embed_check: tuple[np.ndarray, np.ndarray, float], eval_ids: list[str],
                    n_items: int) -> Iterable[tuple[int, list[str], float]]:
    """(item index, eval ids at or over the threshold, max similarity), block by block."""
    items, evals, threshold = embed_check
    items, evals = unit_rows(items), unit_rows(evals)
    if len(items) != n_items:
        raise ValueError(f"embed_check: {len(items)} item vectors for {n_items} texts")
    if len(evals) != len(eval_ids):
        raise ValueError(f"embed_check: {len(evals)} eval vectors for {len(eval_ids)} eval items "
                         "(rows must follow the order the NgramIndex was built in)")
    if len(evals) == 0:
        return
    for start in range(0, len(items), _BLOCK):
        sims = items[start:start + _BLOCK] @ evals.T
        for row in np.flatnonzero((sims >= threshold - _EPS).any(axis=1)):
            over = np.flatnonzero(sims[row] >= threshold - _EPS)
            over = over[np.argsort(-sims[row, over], kind="stable")]
            yield start + int(row), [eval_ids[j] for j in over], float(sims[row, over[0]])


