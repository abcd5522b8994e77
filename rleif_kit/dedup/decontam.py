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

import re
import unicodedata
from typing import Iterable, Sequence

import numpy as np

from rleif_kit.dedup.embeddings import unit_rows

__all__ = ["MIN_WORDS", "word_ngrams", "NgramIndex", "decontaminate"]

MIN_WORDS = 8  # a text shorter than n words is used whole when it has at least this many
_WORD_RE = re.compile(r"[^\W_]+")  # runs of letters/digits: punctuation and underscores stripped
_EPS = 1e-6  # float32 slack on the threshold comparison, as in rleif_kit.dedup.near_duplicates
_BLOCK = 1024  # items per block in the embedding layer: block × eval floats at a time


def _words(text: str) -> list[str]:
    return _WORD_RE.findall(unicodedata.normalize("NFKC", text).casefold())


def word_ngrams(text: str, n: int = 13) -> set[tuple[str, ...]]:
    """The word n-grams of ``text``; a text of ``MIN_WORDS``..n-1 words is one "n-gram" (itself),
    a shorter one has none."""
    words = _words(text)
    if len(words) < n:
        return {tuple(words)} if len(words) >= MIN_WORDS else set()
    return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


class NgramIndex:
    """The eval items' n-grams → eval ids; :meth:`hits` looks a training text up.

    ``eval_ids`` keeps the eval items' order: the rows of ``eval_vectors`` given to
    :func:`decontaminate` must follow it.
    """

    def __init__(self, eval_items: Iterable[tuple[str, str]], n: int = 13):
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an integer >= 1, got {n!r}")
        self.n = n
        self.eval_ids: list[str] = []
        self._grams: dict[int, dict[str, set[str]]] = {}  # gram length -> joined gram -> eval ids
        for eval_id, text in eval_items:
            eval_id = str(eval_id)
            self.eval_ids.append(eval_id)
            for gram in word_ngrams(text, n):
                self._grams.setdefault(len(gram), {}).setdefault(" ".join(gram), set()).add(eval_id)

    def __len__(self) -> int:
        return len(self.eval_ids)

    def hits(self, text: str) -> list[str]:
        """Sorted ids of the eval items sharing at least one n-gram (or a whole short item) with ``text``."""
        words = _words(text)
        found: set[str] = set()
        for length, grams in self._grams.items():  # n, plus one entry per short eval item length
            for i in range(len(words) - length + 1):
                ids = grams.get(" ".join(words[i:i + length]))
                if ids:
                    found |= ids
        return sorted(found)


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


