"""Word n-gram overlap between texts: the n-gram layer of decontamination (the GPT-3 paper's recipe).

Why in ``worlds``: two stages ask the same question of it — stage 00 drops evolution seeds that copy an
evaluation item, stage 02 drops evolved instructions that do (``dedup.decontam`` adds the embedding layer).
An item is contaminated when it shares at least one 13-word sequence with an eval item, words lower-cased
with punctuation stripped; an eval item of 8-12 words is used whole, shorter ones are skipped (see
``dedup/decontam.py`` for the full rationale).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Iterable

__all__ = ["MIN_WORDS", "word_ngrams", "NgramIndex"]

MIN_WORDS = 8  # a text shorter than n words is used whole when it has at least this many
_WORD_RE = re.compile(r"[^\W_]+")  # runs of letters/digits: punctuation and underscores stripped


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
