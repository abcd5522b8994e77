"""The reward models as plain scoring functions over instruction records, the shape every reward check takes.

``answer_scorer(records, solutions) -> rA`` and ``instruction_scorer(texts) -> rI``, from a loaded PRM / IRM or
from the world's step verifier (arith: a perfect PRM); ``verifier_scorer`` and ``format_scorer`` give the
verifiable terms rV and rF. The PPO reward, the gate's probes and 07's probes all score through these, so a
check sees exactly the reward PPO is given.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rleif_kit.reward_scoring.irm import irm_score
from rleif_kit.reward_scoring.prm import answer_scores
from rleif_kit.worlds.base import STEP_BY_STEP

AnswerScorer = Callable[[Sequence[dict], Sequence[str]], list]  # (instruction records, solutions) -> rA or None
InstructionScorer = Callable[[Sequence[str]], list]  # instruction texts -> rI


def prm_scorer(model: Any, tokenizer: Any, how: str, batch_size: int = 32, max_len: int = 1024,
               world: Any = STEP_BY_STEP) -> AnswerScorer:
    """rA from a loaded PRM: its step scores aggregated by ``how``; None where it finds no steps."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return answer_scores(model, tokenizer, [(r["text"], s) for r, s in zip(records, solutions)], how,
                             batch_size=batch_size, max_len=max_len, world=world)
    return score


def step_verifier_scorer(world: Any) -> AnswerScorer:
    """rA from the world's step verifier (``answer_reward = "verifier"``): 1 when every step and the answer are
    right, else 0; None for a solution without steps (or a record the verifier cannot read)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [float(all(labels)) if labels else None for labels in world.step_labels_batch(records, solutions)]
    return score


def verifier_scorer(world: Any) -> AnswerScorer:
    """rV: the world's verifier on each response (gold-answer match, the step verifier, unit tests); None where a
    record cannot be verified (the caller counts those)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [v.rv for v in world.check_batch(records, solutions)]
    return score


def verifiable_terms(world: Any, terms: Any, records: Sequence[dict], solutions: Sequence[str],
                     checks: Sequence[Any] | None = None) -> dict[str, list]:
    """rV and rF of each response where ``terms`` (a formula's) names them: ``{"rV", "rV_missing", "rF"}``; a
    record the verifier cannot judge gets rV = 0 and is marked missing. ``checks``: the world's
    ``check_batch`` of these responses when the caller has it already. PPO, GRPO, the gate and 07 all use this."""
    out: dict[str, list] = {}
    if "rV" in terms:
        raw = [c.rv for c in checks] if checks is not None else verifier_scorer(world)(records, solutions)
        out["rV"], out["rV_missing"] = [0.0 if v is None else v for v in raw], [v is None for v in raw]
    if "rF" in terms:
        out["rF"] = format_scorer(world)(records, solutions)
    return out


def format_scorer(world: Any) -> AnswerScorer:
    """rF: the world's format term on each response (steps found and a final answer line)."""
    def score(records: Sequence[dict], solutions: Sequence[str]) -> list:
        return [world.format_score(s) for s in solutions]
    return score


def irm_scorer(model: Any, tokenizer: Any, batch_size: int = 64, max_length: int = 512) -> InstructionScorer:
    def score(texts: Sequence[str]) -> list:
        return irm_score(model, tokenizer, list(texts), batch_size=batch_size, max_length=max_length)
    return score
