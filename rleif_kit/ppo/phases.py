"""Where a PPO step's wall time goes: one timer per phase, the fields each log row gets.

Phases (``<name>_s`` in ``05_ppo/log.jsonl``, TensorBoard's ``time/`` group and the report): ``generate``
(sampling the responses), ``policy_pass`` (log-probs and values of the rollout under the policy), ``ref_pass``
(the reference's log-probs), ``reward`` (IRM, PRM or verifier; the sandbox's share of it is ``verify_s``) and
``update`` (the clipped updates and the KL after them); the trainer adds ``checkpoint_s``, the save after the
previous step (a row is written before its checkpoint, so a crash never leaves a checkpoint ahead of its log),
and ``step_s``, all of it with the bookkeeping between the phases. Beside them: ``gen_tokens_per_s``
(response tokens sampled per second of ``generate``) and ``pad_ratio`` (tokens the update's passes computed per
real token they covered, padding included: the whole left-padded width, or with ``[ppo] trim_padding`` each
minibatch's own columns; 1.0 is none).

On a GPU the timer synchronises the device at each phase boundary, so asynchronous kernels count in the phase
that queued them (it costs one sync per phase, a few per step).
"""

from __future__ import annotations

import contextlib
import time
from typing import Iterator

PHASES = ("generate", "policy_pass", "ref_pass", "reward", "update")


def _sync() -> None:
    import torch  # heavy: loaded on first use (the trainer has it loaded already)

    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


class PhaseTimer:
    """Seconds per phase of one step: ``with timer("generate"): ...``; a phase entered twice adds up."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def __call__(self, phase: str) -> Iterator[None]:
        if phase not in PHASES:
            raise ValueError(f"unknown PPO phase {phase!r}; one of {', '.join(PHASES)}")
        _sync()
        start = time.perf_counter()
        try:
            yield
        finally:
            _sync()
            self.seconds[phase] = self.seconds.get(phase, 0.0) + time.perf_counter() - start

    def fields(self) -> dict[str, float]:
        return {f"{phase}_s": round(self.seconds[phase], 3) for phase in PHASES if phase in self.seconds}


def rollout_fields(response_tokens: int, generate_s: float, computed_tokens: int, real_tokens: int) -> dict:
    """``gen_tokens_per_s`` and ``pad_ratio`` of one rollout (None where a count is 0)."""
    return {"gen_tokens_per_s": round(response_tokens / generate_s, 2) if generate_s > 0 else None,
            "pad_ratio": round(computed_tokens / real_tokens, 4) if real_tokens else None}
