"""Elimination of evolved instructions (rleif_kit.evolve.elimination): each reason, its near misses, order.

Pure string rules, in-memory, no network.
"""
from __future__ import annotations

import pytest

from rleif_kit.evolve.elimination import LEAK_PHRASES, REASONS, clean_evolved_text, elimination_reason, lexically_same

PARENT = ("Tom has 5 apples. Then he buys 3 more apples. Later, he gives 2 apples to his sister. "
          "How many apples does Tom have now?")
# A fine evolution of PARENT: one more step (the "doubles" sentence).
CHILD = ("Tom has 5 apples. Then he buys 3 more apples. Later, he gives 2 apples to his sister. "
         "Then he doubles the number of apples. How many apples does Tom have now?")
LONG_SORRY = (
    "Maya runs a small bakery and she is sorry to tell her customers that the oven broke on "
    "Monday morning, so she could only bake 24 muffins instead of the usual 60. On Tuesday the "
    "repair man came, and she baked 3 times as many muffins as on Monday. On Wednesday she sold "
    "half of all the muffins she had baked so far, and she gave 7 of the remaining muffins to "
    "the school next door because she felt sorry that the children missed their snack. "
    "I can't believe how busy the week was, she told her friend. How many muffins are left?")


def test_reasons_are_the_documented_six():
    assert REASONS == ("empty", "leaked_template", "refusal", "no_new_information", "unparseable", "garbled")


def test_acceptable_child_passes():
    assert elimination_reason(PARENT, CHILD) is None
    assert elimination_reason(PARENT, CHILD, finish_reason="stop") is None


# ------------------------------------------------------------------------------- cleaning

@pytest.mark.parametrize("raw, clean", [
    ("#Rewritten Prompt#: Tom has 5 apples.", "Tom has 5 apples."),
    ("  Rewritten prompt:  Tom has 5 apples. \n", "Tom has 5 apples."),
    ("New instruction: Sort the list.", "Sort the list."),
    ("**Rewritten Prompt:** Sort the list.", "Sort the list."),
    ("Sure! Here is the rewritten prompt: Sort the list.", "Sort the list."),
    ('"Tom has 5 apples."', "Tom has 5 apples."),
    ("\u201cTom\u2019s apples are red.\u201d", "Tom\u2019s apples are red."),
    ("```\n#Created Prompt#:\n'Sort the list.'\n```", "Sort the list."),  # layers, any order
    ("```text\nSort the list.\n```", "Sort the list."),
])
def test_clean_strips_wrapper_noise(raw, clean):
    assert clean_evolved_text(raw) == clean


@pytest.mark.parametrize("text", [
    "Problem solving is fun: explain why.",         # "Problem" without a colon is a word
    '"Yes" and "no" are both answers here.',       # two quotes, not one wrapping quote
    "Write code:\n```python\nprint(1)\n```",       # a fence inside the instruction is content
    "Tom has 5 apples. #Rewritten Prompt#: Then he buys 3.",  # only LEADING labels go
])
def test_clean_leaves_content_alone(text):
    assert clean_evolved_text(text) == text


# -------------------------------------------------------------------------------- reasons

@pytest.mark.parametrize("child, finish_reason", [
    (CHILD, "length"),                                    # cut off by the token limit
    ("Tom has 5 apples. Then he ##@@%%^^&&**~~||<<>>{{}}$$##@@%%^^&&**~~", None),  # < 40% text
    ("Write a function:\n```python\ndef f(x):\n    return x", None),  # unclosed code fence
    ("Tom has 5 apples. Then he buys 3 more apples and the", None),    # dangling end
    ("Tom has 5 apples. Then he buys 3 more apples,", None),
])
def test_unparseable(child, finish_reason):
    assert elimination_reason(PARENT, child, finish_reason=finish_reason) == "unparseable"


@pytest.mark.parametrize("child", [
    "Compute $\\frac{3}{4} + \\frac{1}{8}$ and simplify the result.",  # math symbols are fine
    "Fix the bug:\n```python\ndef f(x):\n    return x +\n```\nExplain the fix.",  # fences balanced
    "What is 2 + 3 * 4?",
    "Name a fruit that is red",  # no final full stop, but no dangling word either
])
def test_unparseable_near_misses(child):
    assert elimination_reason(PARENT, child) is None


@pytest.mark.parametrize("child", ["", "   \n ", "#Rewritten Prompt#:", "```\n```", "...!?",
                                   "So, what is it then?", '"Why?"'])
def test_empty(child):
    assert elimination_reason(PARENT, child) == "empty"


@pytest.mark.parametrize("child", ["Why 7?", "Sort it.", "Rewritten prompt: Sort it."])
def test_empty_near_misses(child):  # one number or one content word is enough
    assert elimination_reason(PARENT, child) is None


@pytest.mark.parametrize("child", [
    "Tom has 5 apples. #Rewritten Prompt#: Then he buys 3 more apples. How many now?",
    CHILD + " (rewritten from the given prompt)",
    "The rewritten prompt is: " + CHILD,
    "Make the above prompt harder: " + CHILD,
    CHILD + "\n\n#Given Prompt#: " + PARENT,
    "#Instruction# " + CHILD.replace("Then he doubles", "#Method List# Then he doubles"),
    CHILD.replace("Then he doubles", "#New Step# Then he doubles"),  # any #Label# marker
])
def test_leaked_template(child):
    assert elimination_reason(PARENT, child) == "leaked_template"


def test_leak_phrases_are_lower_case_so_matching_is_case_insensitive():
    assert all(p == p.lower() for p in LEAK_PHRASES)
    assert elimination_reason(PARENT, CHILD + " (see the GIVEN PROMPT)") == "leaked_template"


@pytest.mark.parametrize("child", [
    "#Rewritten Prompt#: " + CHILD,                  # a leading label is cleaned, not a leak
    "Write a C# function that adds 3 and 4.",        # '#' without a label
    "Given a prompt string s, count its vowels.",    # "given a prompt" is not "given prompt"
])
def test_leaked_template_near_misses(child):
    assert elimination_reason(PARENT, child) is None


@pytest.mark.parametrize("child", [
    "I'm sorry, but I can't rewrite this problem.",
    "I\u2019m sorry, but I can\u2019t do that.",                 # curly apostrophes
    "Sorry, I cannot make this problem harder without changing its meaning.",
    "As an AI language model, I cannot create a new version of this question.",
    "Unfortunately, I cannot help with that.",
    "This one is tricky. I'm unable to rewrite it while keeping the numbers.",
])
def test_refusal(child):
    assert elimination_reason(PARENT, child) == "refusal"


@pytest.mark.parametrize("child", [
    LONG_SORRY,  # >= 80 words of story that mention "sorry" and "I can't"
    "Tom says sorry to Anna and gives her 3 of his 7 apples. How many apples does Tom have left?",
])
def test_refusal_near_misses(child):
    assert len(LONG_SORRY.split()) >= 80
    assert elimination_reason(PARENT, child) is None


@pytest.mark.parametrize("child", [
    PARENT,
    PARENT.upper(),                                            # case
    PARENT.replace(". ", ".\n\n  ").replace("?", " ?"),        # whitespace, punctuation
    PARENT.replace("How many", "So, how many"),                # one stop word added
    "Rewritten problem: " + PARENT,                            # label + the same text
])
def test_no_new_information(child):
    assert elimination_reason(PARENT, child) == "no_new_information"


@pytest.mark.parametrize("child", [
    PARENT.replace("3 more", "4 more"),                        # one number changed
    PARENT.replace("Tom has 5 apples. Then he buys 3", "Tom has 3 apples. Then he buys 5"),
    PARENT.replace("buys 3 more apples", "gets 3 times as many apples"),  # same numbers
    PARENT.replace("Tom", "Anna", 1),                          # a new content word
    PARENT.replace("Later, he gives 2 apples to his sister. ", ""),  # a step dropped
])
def test_no_new_information_near_misses(child):
    assert elimination_reason(PARENT, child) is None


def test_lexically_same_threshold():
    child = PARENT.replace("How many", "So, how many")  # "so" added to 20 distinct words
    assert lexically_same(PARENT, child)                 # Jaccard 20/21 = 0.952 >= 0.9
    assert not lexically_same(PARENT, child, threshold=0.96)
    assert elimination_reason(PARENT, child, same_threshold=0.96) is None
    assert lexically_same(PARENT, PARENT, threshold=1.0)
    assert lexically_same("1,000 apples", "1000 apples.")


# ----------------------------------------------------------------------------- precedence

@pytest.mark.parametrize("child, finish_reason, reason", [
    ("I'm sorry, but I can't rewrite this problem.", "length", "unparseable"),  # > refusal
    ("#Given Prompt#: ```", None, "unparseable"),                # unbalanced fence > leak
    ("#Rewritten Prompt#:", "stop", "empty"),                    # label cleaned > leak
    ("I'm sorry, I cannot rewrite the given prompt.", None, "leaked_template"),  # > refusal
    (PARENT + " (rewritten from the given prompt)", None, "leaked_template"),  # > no new info
    ("I'm sorry, I can't help.", None, "refusal"),               # parent is the same refusal:
])
def test_first_reason_in_order_wins(child, finish_reason, reason):
    parent = "I'm sorry, I can't help." if reason == "refusal" else PARENT  # refusal > same
    assert elimination_reason(parent, child, finish_reason=finish_reason) == reason
