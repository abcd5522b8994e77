"""Decontamination against eval items: n-gram overlap, short eval items, the embedding layer.

In-memory, hand-built texts and vectors; no model, no network.
"""

from __future__ import annotations

import numpy as np
import pytest

from rleif_kit.dedup.decontam import NgramIndex, decontaminate, word_ngrams

EVAL = ("Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins "
        "for her friends every day with four.")  # 24 words
WORDS = EVAL.replace("'", " ").replace(".", "").split()  # janet s ducks lay ... (punctuation stripped)


def test_word_ngrams_lowercase_and_strip_punctuation():
    grams = word_ngrams("A, b. C! d e f g h i j k l m n", n=13)
    assert grams == {tuple("abcdefghijklm"), tuple("bcdefghijklmn")}  # 14 words -> 14 - 13 + 1 = 2
    assert word_ngrams("one two three four five six seven eight") == {tuple("one two three four five six seven "
                                                                            "eight".split())}  # 8 words: whole
    assert word_ngrams("one two three four five six seven") == set()  # 7 words: too short


def test_thirteen_word_overlap_found_twelve_not():
    index = NgramIndex([("gsm8k-0", EVAL), ("gsm8k-1", "Unrelated text about trains and stations " * 3)])
    thirteen = " ".join(WORDS[5:18])  # words 5..17 of the eval item: one shared 13-gram
    twelve = " ".join(WORDS[5:17])
    assert len(thirteen.split()) == 13 and len(twelve.split()) == 12
    assert index.hits(f"Consider this. {thirteen.upper()}! Then answer.") == ["gsm8k-0"]
    assert index.hits(f"Consider this: {twelve} and then answer the question please.") == []


def test_short_eval_items_are_protected_whole():
    index = NgramIndex([("short-10", "What is the sum of the first ten odd numbers?"),  # 10 words: used whole
                        ("tiny-5", "What is 7 times 8?")])  # 5 words: skipped
    assert index.hits("Quick question: what is the SUM of the first ten odd numbers? Show work.") == ["short-10"]
    assert index.hits("What is the sum of the first ten even numbers?") == []
    assert index.hits("Tell me: what is 7 times 8? Explain.") == []


def test_decontaminate_ngram_and_embedding_layers():
    index = NgramIndex([("e0", EVAL), ("e1", "Some other evaluation problem about a train and a station " * 2)])
    texts = [" ".join(WORDS[:14]), "A paraphrased copy of the second eval item", "Clean text", "Also clean"]
    # item vectors: 0 = e0 (also an n-gram hit), 1 = e1·0.9 + noise (cos 0.9), 2 and 3 far from both
    evals = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=np.float32)
    items = np.array([[1.0, 0.0, 0.0], [0.0, 0.9, np.sqrt(1 - 0.81)], [0.0, 0.0, 1.0], [0.5, 0.5, 0.7]],
                     dtype=np.float32)
    assert decontaminate(["t0", "t1", "t2", "t3"], texts, index) == [
        {"index": 0, "id": "t0", "eval_ids": ["e0"], "method": "ngram"}]
    found = decontaminate(["t0", "t1", "t2", "t3"], texts, index, embed_check=(items, evals, 0.9))
    assert [(f["index"], f["method"], f["eval_ids"]) for f in found] == [(0, "ngram", ["e0"]), (1, "embedding", ["e1"])]
    assert found[1]["similarity"] == pytest.approx(0.9, abs=1e-6)  # exactly at the threshold: a hit
    with pytest.raises(ValueError, match="eval vectors"):
        decontaminate(["t0"], texts[:1], index, embed_check=(items[:1], evals[:1], 0.9))


def test_embedding_layer_blocks_match_a_plain_matrix():
    # 2500 items > the 1024-item block: the blocked scan must find what one big product finds.
    rng = np.random.default_rng(0)
    evals = rng.normal(size=(50, 8)).astype(np.float32)
    items = np.concatenate([rng.normal(size=(2450, 8)), evals + 0.1 * rng.normal(size=(50, 8))]).astype(np.float32)
    index = NgramIndex((f"e{j}", "") for j in range(50))
    found = decontaminate([str(i) for i in range(2500)], [""] * 2500, index, embed_check=(items, evals, 0.9))
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)  # noqa: E731
    sims = unit(items) @ unit(evals).T
    assert [f["index"] for f in found] == np.flatnonzero((sims >= 0.9 - 1e-6).any(axis=1)).tolist()
    assert all(f["eval_ids"][0] == f"e{int(sims[f['index']].argmax())}" for f in found)
    assert len(found) >= 50
