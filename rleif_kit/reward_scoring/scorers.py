"""The reward models as plain scoring functions over instruction records, the shape every reward check takes.

``answer_scorer(records, solutions) -> rA`` and ``instruction_scorer(texts) -> rI``, from a loaded PRM / IRM or
from the arithmetic world's step verifier (a perfect PRM): the PPO reward, the gate's probes and 07's probes
all score through these, so a check sees exactly the reward PPO is given.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rleif_kit.reward_scoring.irm import irm_score
from rleif_kit.reward_scoring.prm import answer_scores
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.step_labels import verifier_labels

AnswerScorer = Callable[[Sequence[dict], Sequence[str]], list]  # (instruction records, solutions) -> rA or None
InstructionScorer = Callable[[Sequence[str]], list]  # instruction texts -> rI


def prm_scorer(model: Any, tokenizer: Any, how: str, batch_size: int = 32, max_len: int = 1024) -> AnswerScorer:
    """rA from a loaded PRM: its step scores aggregated by ``how``; None where it finds no steps."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return answer_scores(model, tokenizer, [(r["text"], s) for r, s in zip(records, solutions)], how,
                             batch_size=batch_size, max_len=max_len)
    return score


def verifier_scores(records: Sequence[dict], solutions: Sequence[str]) -> list:
    """rA from the arithmetic world's step verifier: 1 when every step and the answer are right, else 0; None for
    a solution without steps."""
    out: list = []
    for r, text in zip(records, solutions):
        labels = verifier_labels(r["text"], text, arith.Problem.from_record(r["problem"]).answer())
        out.append(float(all(labels)) if labels else None)
    return out


def irm_scorer(model: Any, tokenizer: Any, batch_size: int = 64, max_length: int = 512) -> InstructionScorer:
    def score(texts: Sequence[str]) -> list:
        return irm_score(model, tokenizer, list(texts), batch_size=batch_size, max_length=max_length)
    return score
