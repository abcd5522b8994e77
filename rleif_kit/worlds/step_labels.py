"""Where each step ends in token space, and per-step labels from the arithmetic verifier.

Why: the process reward model (PRM) is trained with one label per step, read at the LAST token
of that step (the model has then seen the whole step, and nothing of the next). Finding that
token is pure bookkeeping over a tokenizer's character offsets, so it lives here, without a
tokenizer import, and is tested on hand-made offsets; an off-by-one here would silently put
every label on the wrong token.
"""
from __future__ import annotations

from typing import Sequence

from rleif_kit.worlds.arith import problems as arith

__all__ = ["step_end_positions", "step_char_ends", "verifier_labels"]

# Test-only: False reproduces the answer-blind labelling of before issue 16 (the last label read before
# "The answer is:"), so the regression suite can train the broken PRM its checks must catch. Never set in a run.
LABEL_AFTER_ANSWER = True


def _last_token_of(offsets: Sequence[tuple[int, int]], end: int) -> int | None:
    """Index of the token covering character ``end - 1``, else of the last token ending by ``end``.

    Zero-width spans (BOS/EOS and other special tokens, offset (0, 0)) are skipped. The
    fallback (the step's last character is in a gap no token covers) is only trusted when a
    token starts at or after ``end``: if none does, the text was truncated inside the step.
    """
    covering, before, after = None, None, False
    for i, (start, stop) in enumerate(offsets):
        if start == stop:
            continue
        if start <= end - 1 < stop:
            covering = i
        elif stop <= end:
            before = i
        elif start >= end:
            after = True
    if covering is not None:
        return covering
    return before if after else None


def step_end_positions(offsets: Sequence[tuple[int, int]], step_char_ends: Sequence[int],
                       max_len: int | None = None) -> list[int | None]:
    """Token index of the last token of each step; None for a step cut off at ``max_len`` tokens.

    ``offsets`` are (start, end) character spans per token of the tokenized solution (as a
    fast tokenizer's ``return_offsets_mapping`` gives them); ``step_char_ends`` the exclusive
    character end of each step (:func:`step_char_ends`). A token that straddles a step's end
    (e.g. ``".\\n"``) is that step's last token. Truncation is applied here, so the caller may
    pass the untruncated offsets.
    """
    kept = list(offsets) if max_len is None else list(offsets)[:max_len]
    return [_last_token_of(kept, end) for end in step_char_ends]


def step_char_ends(solution: str) -> list[int]:
    """Exclusive character end of each 'Step k: ...' segment, trailing space excluded; the LAST step ends
    where its final answer line ends (``The answer is: X`` included).

    Why the answer belongs to the last step: its label says whether the solution is right, and the PRM is a
    causal token classifier, so at a token before the answer it cannot know the answer (nor whether the
    solution goes on). Read at the end of the answer line, the last score depends on the answer, and a
    solution that stops one step early carries its verdict at its own answer, not at a prefix it shares with
    the complete solution. The earlier steps are ``parse_steps``' segments (``solution[start:end]`` of step i
    is ``parse_steps(solution)[i]``). [] when there are no step markers, which the caller flags rather than
    labels.
    """
    marks = list(arith.STEP_MARK.finditer(solution))
    bounds = [m.start() for m in marks[1:]] + [len(solution)]
    ends = []
    for m, bound in zip(marks, bounds):
        segment = solution[m.start():bound]
        answer = arith.ANSWER_MARK.search(segment)
        if answer is not None and bound == len(solution) and LABEL_AFTER_ANSWER:  # the last step: through its answer
            line_end = segment.find("\n", answer.end())
            segment = segment[:line_end if line_end >= 0 else len(segment)]
        else:
            segment = arith.ANSWER_MARK.split(segment)[0]
        ends.append(m.start() + len(segment.rstrip()))
    return ends


def verifier_labels(question: str, solution: str, gold, answer_counts: bool = True) -> list[bool]:
    """One label per step (aligned with :func:`step_char_ends`) from :func:`arith.verify_solution`.

    The verifier flags an error only where it is made; here every step after the first wrong
    one is wrong too, because a step built on a wrong result is not a correct step of *this*
    solution, and with ``min`` aggregation the PRM should learn that the chain is broken from
    there on. With ``answer_counts`` a wrong or missing final answer marks the last step wrong:
    otherwise a correct-but-unfinished chain (stopping one op early) scores as fully correct,
    and PPO would learn to stop early. [] when the solution has no step markers.
    """
    if not arith.parse_steps(solution):
        return []
    verdict = arith.verify_solution(question, solution, gold)
    labels, ok = [], True
    for step_ok in verdict.step_ok:
        ok = ok and step_ok
        labels.append(ok)
    if answer_counts and not verdict.answer_ok:
        labels[-1] = False
    return labels
