"""Judge answer parsing (rleif_kit.rewards.judges): read what is clear, return None for anything else."""

from __future__ import annotations

import pytest

from rleif_kit.rewards.judges import (IRM_JUDGE_PROMPT, PRM_JUDGE_PROMPT, format_variants, load_prompt,
                              parse_ranking, parse_step_labels)

IDS = ["id-a", "id-b", "id-c", "id-d"]  # shown to the judge as A, B, C, D (or 1, 2, 3, 4)
B_A_D_C = ["id-b", "id-a", "id-d", "id-c"]


@pytest.mark.parametrize("text", [
    "B > A > D > C",
    "B>A>D>C",
    "Ranking: 2, 1, 4, 3",
    '["B", "A", "D", "C"]',
    "[2, 1, 4, 3]",
    "A is vague and C leaks template text.\nRanking: Variant B > Variant A > Variant D > Variant C.",
    "**Ranking:** [B, A, D, C]",
    "Ranking:\nb > a > d > c",
    "Let me think.\nRanking: A > B > C > D\nOn reflection:\nRanking: B > A > D > C",  # last one counts
])
def test_well_formed_rankings(text):
    assert parse_ranking(text, IDS) == B_A_D_C


@pytest.mark.parametrize("text", [
    "B > A > D",                        # incomplete: C missing
    "B > A > D > C > A",                # A twice
    "B > A = D > C",                    # a tie is not an order
    "C < D < A < B",                    # reversed notation: refused, not flipped
    "Ranking: 2, 1, 5, 3",              # 5 is no label for k = 4
    "Ranking: B, 1, D, C",              # letters and numbers mixed
    "B > A > D > C\nA > B > C > D",     # two different rankings, no 'Ranking:' to choose
    "I like B best, then A.",           # prose only
    '["B", "A"] or maybe ["A", "B"]',   # two different JSON lists
    "Ranking: B > A > D > E",           # E is no label for k = 4
    "",
])
def test_malformed_or_partial_rankings_are_none(text):
    assert parse_ranking(text, IDS) is None


def test_ranking_with_two_items_and_repeated_identical_line():
    assert parse_ranking("B > A\nB > A", ["x", "y"]) == ["y", "x"]  # same ranking twice: not ambiguous


@pytest.mark.parametrize("text, expected", [
    ("Step 1: correct\nStep 2: incorrect\nStep 3: correct", [True, False, True]),
    ("1: +\n2: -\n3: +", [True, False, True]),
    ("[true, false, true]", [True, False, True]),
    ("[1, 0, 0]", [True, False, False]),
    ("**Step 1:** Correct, 3 + 5 = 8.\n**Step 2:** Incorrect: 8 - 2 is 6.\n**Step 3:** wrong",
     [True, False, False]),
    ("Checking each step.\nStep 1: right\nStep 2: not correct\nStep 3: ✓", [True, False, True]),
    ("Step 3: correct\nStep 1: correct\nStep 2: wrong", [True, False, True]),  # any order
    ("- Step 1: correct\n- Step 2: correct\n- Step 3: correct", [True, True, True]),
])
def test_well_formed_step_labels(text, expected):
    assert parse_step_labels(text, 3) == expected


@pytest.mark.parametrize("text", [
    "Step 1: correct\nStep 2: incorrect",                       # step 3 missing
    "Step 1: correct\nStep 2: incorrect\nStep 2: correct\nStep 3: correct",  # step 2 twice
    "Step 1: correct\nStep 2: maybe\nStep 3: correct",          # unreadable verdict
    "Step 1: correct\nStep 2: correct\nStep 4: correct",        # 4 > n_steps, 3 missing
    "[true, false]",                                            # wrong length
    "[1, 2, 0]",                                                # 2 is not a label
    "[0.5, 1, 1]",                                              # a score is not a label
    "All steps look fine to me.",                               # prose only
    "1: -3 + 5\n2: +\n3: +",                                    # '-3' is a number, not a verdict
    "",
])
def test_malformed_or_partial_step_labels_are_none(text):
    assert parse_step_labels(text, 3) is None


def test_format_variants_labels_with_letters():
    assert format_variants(["Add 2 and 3.", " Sum 2 and 3. "]) == (
        "Variant A:\nAdd 2 and 3.\n\nVariant B:\nSum 2 and 3.")
    with pytest.raises(ValueError):
        format_variants(["x"] * 27)


def test_prompts_load_and_fill():
    assert load_prompt("irm_ranking") == IRM_JUDGE_PROMPT
    irm = IRM_JUDGE_PROMPT.format(k=2, variants=format_variants(["p", "q"]))
    for word in ("Definition", "Precision", "Integrity", "Variant B:\nq", "Ranking:"):
        assert word in irm
    prm = PRM_JUDGE_PROMPT.format(question="Q?", n_steps=2, solution="Step 1: 1 + 1 = 2.")
    assert "Q?" in prm and "Step 1: 1 + 1 = 2." in prm and "correct" in prm
    # the example answer in the prompt is itself readable by the parser
    assert parse_step_labels(prm.split("nothing else:\n", 1)[1], 2) == [True, False]
