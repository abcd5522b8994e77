"""What a step is: the one step module every world configures, and where each step ends in token space.

Why one module: the process reward model (PRM) is trained with one label per step, read at the LAST token of
that step (the model has then seen the whole step, and nothing of the next), and the judges, the verifier, the
probes, PPO's scorer and the SFT format check must all agree on where a step ends, or a label sits on the
wrong token without anyone seeing it. A world says how its solutions split (:class:`StepFormat`); the
arithmetic and math worlds share :data:`STEPWISE` (``Step 1: 3 + 5 = 8. Step 2: ... The answer is: 6``);
the code world (next) splits a program its own way by overriding :meth:`StepFormat.char_ends`.

Finding a step's last token is pure bookkeeping over a tokenizer's character offsets, so it lives here,
without a tokenizer import, and is tested on hand-made offsets (``tests/test_step_labels.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

__all__ = ["StepFormat", "STEPWISE", "step_end_positions"]

# Test-only: False reproduces the answer-blind labelling of before issue 16 (the last label read before
# "The answer is:"), so the regression suite can train the broken PRM its checks must catch. Never set in a run.
LABEL_AFTER_ANSWER = True


@dataclass(frozen=True)
class StepFormat:
    """How a solution splits into steps: ``marker`` starts a step, ``answer`` starts the final answer line, and
    with ``lines`` a solution without markers is one step per non-empty line (when it has at least two)."""

    # what a step is, in the words of the model cards (a class attribute, not a field: a subclass sets its own)
    about = ("Steps are `Step k:` segments (or one per line); the last step runs through its `The answer is: X` "
             "line, so its score sees the answer.")

    marker: re.Pattern = re.compile(r"Step\s*\d+\s*:", re.I)
    answer: re.Pattern = re.compile(r"The answer is:", re.I)
    lines: bool = True

    def segments(self, solution: str) -> list[str]:
        """The ``"Step k: ..."`` segments (marker kept), text before the first marker and the trailing answer
        part dropped; [] when there are no step markers."""
        marks = list(self.marker.finditer(solution))
        ends = [m.start() for m in marks[1:]] + [len(solution)]
        return [self.answer.split(solution[m.start():end])[0].strip() for m, end in zip(marks, ends)]

    def marked_ends(self, solution: str) -> list[int]:
        """Exclusive character end of each marked step, trailing space excluded; the LAST step ends where its
        final answer line ends (``The answer is: X`` included).

        Why the answer belongs to the last step: its label says whether the solution is right, and the PRM is a
        causal token classifier, so at a token before the answer it cannot know the answer (nor whether the
        solution goes on). Read at the end of the answer line, the last score depends on the answer, and a
        solution that stops one step early carries its verdict at its own answer, not at a prefix it shares
        with the complete solution. The earlier steps are :meth:`segments` (``solution[start:end]`` of step i
        is ``segments(solution)[i]``). [] when there are no step markers."""
        marks = list(self.marker.finditer(solution))
        bounds = [m.start() for m in marks[1:]] + [len(solution)]
        ends = []
        for m, bound in zip(marks, bounds):
            segment = solution[m.start():bound]
            answer = self.answer.search(segment)
            if answer is not None and bound == len(solution) and LABEL_AFTER_ANSWER:  # the last step: its answer too
                line_end = segment.find("\n", answer.end())
                segment = segment[:line_end if line_end >= 0 else len(segment)]
            else:
                segment = self.answer.split(segment)[0]
            ends.append(m.start() + len(segment.rstrip()))
        return ends

    def char_ends(self, solution: str) -> list[int]:
        """Exclusive character end of each step: the markers, else (with ``lines``) one step per line when there
        are at least two. The final answer line belongs to the last step. [] when neither form is present: the
        caller flags the solution. Training, scoring, the gate, PPO, GRPO and the judges all place labels here."""
        ends = self.marked_ends(solution)
        if ends or not self.lines:
            return ends
        pos = 0
        for line in solution.splitlines(keepends=True):
            body = line.rstrip()
            if body.strip().lower().startswith("the answer is"):
                if ends and LABEL_AFTER_ANSWER:
                    ends[-1] = pos + len(body)  # the answer line ends the last step
            elif body.strip():
                ends.append(pos + len(body))
            pos += len(line)
        return ends if len(ends) >= 2 else []

    def well_formed(self, solution: str) -> bool:
        """Steps found, and a final answer line with something on it that no step follows: what the format term
        rF rewards (a world's verifier, not this, says whether the answer is right)."""
        answers = list(self.answer.finditer(solution))
        if not self.char_ends(solution) or not answers:
            return False
        tail = solution[answers[-1].end():]
        return bool(tail.strip()) and self.marker.search(tail) is None


STEPWISE = StepFormat()  # the format of the arithmetic and math worlds (and of WizardMath's SFT data)


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
    character end of each step (:meth:`StepFormat.char_ends`). A token that straddles a step's end
    (e.g. ``".\\n"``) is that step's last token. Truncation is applied here, so the caller may
    pass the untruncated offsets.
    """
    kept = list(offsets) if max_len is None else list(offsets)[:max_len]
    return [_last_token_of(kept, end) for end in step_char_ends]
