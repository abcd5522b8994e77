"""Step ends in token space and verifier labels (rleif_kit.worlds.steps): hand-made offsets, no tokenizer."""

from __future__ import annotations

from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.judge import verifier_labels
from rleif_kit.worlds.steps import STEPWISE, step_end_positions

step_char_ends = STEPWISE.marked_ends

# "Step 1: 3 + 5 = 8." is chars 0..17 (end 18), "\n\n" is 18..19, "Step 2: 8 - 2 = 6." is 20..37 (end 38)
TEXT = "Step 1: 3 + 5 = 8.\n\nStep 2: 8 - 2 = 6."
OFFSETS = [
    (0, 0),    # 0  <s> (special, zero width)
    (0, 4),    # 1  "Step"
    (4, 7),    # 2  " 1:"
    (7, 13),   # 3  " 3 + 5"
    (13, 17),  # 4  " = 8"
    (17, 18),  # 5  "."       <- last token of step 1
    (18, 19),  # 6  "\n"      two-token separator,
    (19, 20),  # 7  "\n"      belongs to no step
    (20, 24),  # 8  "Step"
    (24, 27),  # 9  " 2:"
    (27, 33),  # 10 " 8 - 2"
    (33, 37),  # 11 " = 6"
    (37, 38),  # 12 "."       <- last token of step 2
]


def test_step_char_ends_of_hand_text():
    assert step_char_ends(TEXT) == [18, 38]  # 18 = len("Step 1: 3 + 5 = 8."); 20 + 18 = 38


def test_last_token_of_each_step_skips_the_two_token_separator():
    assert step_end_positions(OFFSETS, [18, 38]) == [5, 12]


def test_a_token_straddling_the_step_end_is_the_steps_last_token():
    merged = OFFSETS[:5] + [(17, 19), (19, 20)] + OFFSETS[8:]  # ".\n" is one token (index 5)
    assert step_end_positions(merged, [18, 38]) == [5, 11]     # one token fewer: "." is now 11


def test_end_in_an_uncovered_gap_falls_back_to_the_last_token_before_it():
    # a tokenizer that drops whitespace: no token covers char 18 ("\n"); a step end at 19
    no_ws = [o for o in OFFSETS if o not in ((18, 19), (19, 20))]
    assert step_end_positions(no_ws, [19]) == [5]  # "." (17, 18) ends before 19, "Step" starts after


def test_truncation_cuts_off_later_steps():
    # max_len 10 keeps tokens 0..9: step 1 ends at token 5, step 2's "." (token 12) is gone
    assert step_end_positions(OFFSETS, [18, 38], max_len=10) == [5, None]
    # max_len 5 keeps tokens 0..4: step 1 stops mid-step at " = 8", which must NOT be used
    assert step_end_positions(OFFSETS, [18, 38], max_len=5) == [None, None]
    # already-truncated offsets behave the same as max_len
    assert step_end_positions(OFFSETS[:10], [18, 38]) == [5, None]
    assert step_end_positions(OFFSETS, [18, 38], max_len=13) == [5, 12]  # exactly fits


def test_step_char_ends_match_arith_parse_steps_on_generated_solutions():
    """Every step is parse_steps' segment; the last one runs on through its answer line, to the end."""
    for rec in arith.generate_problems(20, seed=7, min_steps=1, max_steps=4):
        sol = rec["solution"]
        ends, steps = step_char_ends(sol), arith.parse_steps(sol)
        starts = [m.start() for m in arith.STEP_MARK.finditer(sol)]
        segments = [sol[s:e] for s, e in zip(starts, ends)]
        assert segments[:-1] == steps[:-1]
        assert segments[-1] == f"{steps[-1]} The answer is: {rec['answer']}" and ends[-1] == len(sol)
        assert len(ends) == rec["n_steps"]


def test_the_last_step_ends_after_its_answer_and_a_markerless_text_has_none():
    sol = "Step 1: 3 + 5 = 8. The answer is: 8"
    assert step_char_ends(sol) == [35]  # the whole solution: the label is read after the answer
    assert step_char_ends("Step 1: 3 + 5 = 8.\nThe answer is: 8\nThanks!") == [35]  # to the answer line's end
    assert step_char_ends("Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6.") == [18, 37]  # no answer: the step's own end
    assert step_char_ends("3 + 5 = 8, so 8.") == []


def test_an_early_stop_carries_its_verdict_at_its_own_answer():
    """The solution that stops one step early and the complete one share their first two steps, but the
    early stop's last label sits after ITS answer: no scored prefix carries two different labels."""
    complete = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. Step 3: 6 + 4 = 10. The answer is: 10"
    early = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
    labelled = {complete[:e]: v for e, v in zip(step_char_ends(complete), verifier_labels(Q, complete, 10))}
    for end, label in zip(step_char_ends(early), verifier_labels(Q, early, 10)):
        assert labelled.get(early[:end], label) == label
    assert verifier_labels(Q, early, 10) == [True, False] and step_char_ends(early)[-1] == len(early)
    wrong = complete.replace("is: 10", "is: 999")  # only the answer changed: the last scored prefix differs
    assert complete[:step_char_ends(complete)[-1]] != wrong[:step_char_ends(wrong)[-1]]


# Numbers in the question: 3, 5, 2, 4.  Right chain: 3 + 5 = 8, 8 - 2 = 6, 6 + 4 = 10.
Q = ("Tom has 3 apples. Then he buys 5 more apples. Then he eats 2 apples. "
     "Then he picks 4 more apples. How many apples does Tom have now?")


def test_right_solution_is_all_correct():
    sol = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. Step 3: 6 + 4 = 10. The answer is: 10"
    assert verifier_labels(Q, sol, 10) == [True, True, True]


def test_every_step_after_the_first_wrong_one_is_wrong():
    # step 2 claims 8 - 2 = 7 (wrong); step 3, 7 + 4 = 11, is locally right but built on 7
    sol = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 7. Step 3: 7 + 4 = 11. The answer is: 11"
    assert arith.verify_solution(Q, sol, 10).step_ok == [True, False, True]  # the verifier alone
    assert verifier_labels(Q, sol, 10) == [True, False, False]


def test_wrong_first_step_makes_all_wrong():
    sol = "Step 1: 3 + 5 = 9. Step 2: 9 - 2 = 7. Step 3: 7 + 4 = 11. The answer is: 11"
    assert verifier_labels(Q, sol, 10) == [False, False, False]


def test_unfinished_chain_marks_its_last_step_wrong_unless_asked_not_to():
    # two right steps, then it stops at 6; the gold answer is 10
    sol = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6"
    assert verifier_labels(Q, sol, 10) == [True, False]
    assert verifier_labels(Q, sol, 10, answer_counts=False) == [True, True]


def test_labels_align_with_step_ends_and_markerless_gives_none():
    sol = "Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. Step 3: 6 + 4 = 10. The answer is: 10"
    assert len(verifier_labels(Q, sol, 10)) == len(step_char_ends(sol)) == 3
    assert verifier_labels(Q, "3 + 5 - 2 + 4 = 10. The answer is: 10", 10) == []
