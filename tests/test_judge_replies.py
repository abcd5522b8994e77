"""Replies as real judges and evolvers word them, read right or refused — never the opposite verdict. Worked by
hand from the forms collected in rleif_kit/testing/teacher_styles.py and from an adversarial review."""

from __future__ import annotations

import pytest

from rleif_kit.evolve.elimination import clean_evolved_text, elimination_reason, parse_equality
from rleif_kit.rewards.judges import parse_step_labels


@pytest.mark.parametrize("reply,verdict", [
    ("Different.", False), ("**Equal**", True), ("The two problems are equal.", True), ("Not Equal", False),
    ("Not identical", False), ("No, they are not identical.", False), ("Not exactly the same", False),
    ("Non-equal", False), ("Not different", True), ("The problems are not different.", True),
    ("**Verdict:** Different", False), ("Verdict:\nDifferent", False),
    ("Equal. The second problem asks the same thing.", True),
    ("Equal? No, different.", False),               # the asked word is no verdict
    ("Same? No.", None),                            # only asked: no verdict
    ("They are the same problem but different numbers", None),   # says both
    ("Hmm", None),
])
def test_equality_verdicts(reply, verdict):
    assert parse_equality(reply) is verdict


def test_a_cut_reply_counts_only_when_it_opens_with_the_verdict():
    assert parse_equality("Different. The second problem adds", cut=True) is False
    assert parse_equality("The two problems are", cut=True) is None
    assert parse_equality("The two problems are different", cut=True) is None


@pytest.mark.parametrize("reply,labels", [
    ("Step 1: correct\nStep 2: incorrect\n\nStep 2 is incorrect because 12 - 5 = 7, not 8.", [True, False]),
    ("\nStep 1: 5 + 19 = 24. This step is correct.\nStep 2: 24 - 12 = 12. This step is incorrect.", [True, False]),
    ("Step-by-step Evaluation:\nStep 1 is correct. Fine.\nStep 2 contains an error. The sum is off.", [True, False]),
    ("Step 1: Checking. The step is \\boxed{correct}\nStep 2: Checking. The step is \\boxed{incorrect}", [True, False]),
    ("Step 1: correct\nStep 2 is correct in approach, but contains a calculation error.", None),
    ("Step 1: correct\nStep 2 is right to multiply, but 3 * 4 is not 11.", None),
    ("Step 1: correct\nStep 2 has an error? No, it is correct.", None),
    ("Step 1: correct\nStep 2: No errors here. This step is correct.", None),    # 'No' then 'correct': refused
    ("Step 1: correct? No, incorrect\nStep 2: correct", None),
    ("Step 1: correct\nStep 2: The step is correct but the final answer is incorrect.", None),
    ("Step 1: correct\nStep 2: incorrect\nStep 2 is correct.", None),          # two verdicts for step 2
])
def test_step_labels_in_real_forms(reply, labels):
    assert parse_step_labels(reply, 2) == labels


PARENT = "Max has 5 apples."


@pytest.mark.parametrize("text", [
    "In this modified version of chess, each knight moves twice. How many moves are made in 3 turns?",
    'Alice texts Bob: "Let me know if you need more apples." Bob has 3 apples and buys 4. How many does he have?',
    'Tom says, "I hope this helps" and gives 3 apples to Sue, who had 2. How many does Sue have now?',
    "A software update creates a new prompt: every 3 minutes a box opens. How many open in an hour?",
])
def test_a_story_that_uses_the_words_is_no_leak(text):
    assert elimination_reason(PARENT, text) is None


@pytest.mark.parametrize("note", ["In this modified version, this adds a step.", "I hope this helps!",
                                  "This adds an extra step to the reasoning."])
def test_a_note_after_the_problem_is_a_leak(note):
    assert elimination_reason(PARENT, f"Sue has 2 apples and gets 3 more. How many does she have?\n\n{note}") == \
        "leaked_template"


@pytest.mark.parametrize("raw,clean", [
    ("Here's a more challenging version:\n\nMax has 5.", "Max has 5."),
    ("Sure! Here's the rewritten task:\n\nWrite a function f(a) that returns a.",  # a code evolver's preamble
     "Write a function f(a) that returns a."),
    ("Okay, here's the rewritten prompt:\n\nMax has 5.", "Max has 5."),
    ("**New problem:** Max has 5.", "Max has 5."),
    ("Here is my task: I have 3 boxes. How many?", "Here is my task: I have 3 boxes. How many?"),  # a first-person story
])
def test_preambles(raw, clean):
    assert clean_evolved_text(raw) == clean
