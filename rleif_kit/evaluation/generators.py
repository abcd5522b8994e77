"""The two ways evaluation gets text from a model: a local transformers model, or a served one.

Both answer ``complete(prompts, ev, stop, sample_indices) -> list[str | None]`` (None: that request
failed and is left for a rerun), and carry ``name``, ``chunk`` (items per step of the resumable
runner) and ``fingerprint`` (what identifies the model, so results of a retrained model are never
mixed with the old ones). The runner picks one with a plain ``if``; tests pass their own.

- ``LocalModel``: full weights (an SFT ``full`` model, the PPO export, any transformers directory)
  or an SFT adapter merged into its base (``sft_info.json``); bf16 on a GPU that has it, else fp32;
  batched, left-padded generation (``models.generation``).
- ``ServedModel``: the OpenAI-compatible endpoint of ``settings.json`` (roles ``math_eval`` /
  ``code_eval``), with the backend's concurrency and retries. The prompt is the benchmark's whole published one:
  settings.json's ``mode`` "completions" sends it as it is on ``/v1/completions`` (a base-format model such as
  WizardMath, served without a chat template; "auto" finds that out), "chat" as one user message, which the
  server wraps in the model's chat template (``llm/api_mode.py``).
  OpenAI's own API takes at most 4 stop strings, so at most 4 go to the server and every stop is
  applied again to the returned text (the same text either way, only a few more tokens paid for). A rejection
  (a wrong key, URL or model: the backend's ``stopped_reason``) raises ``EndpointRejected`` at once (exit 3,
  one line), instead of leaving every item pending.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.urls import redact_url
from rleif_kit.core.exits import REJECTED_PREFIX, rejected_error
from rleif_kit.core.text import cut_at_stop
from rleif_kit.llm.base import ChatRequest, run_sync
from rleif_kit.llm.openai_backend import OpenAIBackend
from rleif_kit.models.generation import generate
from rleif_kit.models.loading import load_merged

MAX_SERVER_STOPS = 4


def minimal_stops(stop: Sequence[str]) -> list[str]:
    """The stops that matter: one that contains another ("Question:" vs "Question") never fires first."""
    stop = [s for s in dict.fromkeys(stop) if s]
    return [s for s in stop if not any(t != s and t in s for t in stop)]


class LocalModel:
    """A model directory on this machine, loaded on first use and released by ``close``."""

    def __init__(self, path: str | Path, name: str | None = None, batch_size: int = 16):
        self.path = Path(path)
        if not self.path.is_dir():
            raise FileNotFoundError(f"{self.path}: no such model directory")
        self.name = name or self.path.name
        self.batch_size = batch_size
        self.chunk = batch_size * 4
        self._loaded: tuple[Any, Any] | None = None

    @property
    def fingerprint(self) -> dict[str, Any]:
        """Path plus size and modification time of every weights file: a retrained model differs."""
        weights = sorted(p for p in self.path.iterdir() if p.suffix in (".safetensors", ".bin"))
        return {"path": str(self.path.resolve()),
                "weights": [[p.name, p.stat().st_size, p.stat().st_mtime_ns] for p in weights]}

    def load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            self._loaded = load_merged(self.path, inference=True)
        return self._loaded

    def complete(self, prompts: Sequence[str], ev: Any, stop: Sequence[str] = (),
                 sample_indices: Sequence[int] | None = None) -> list[str | None]:
        model, tokenizer = self.load()
        return generate(model, tokenizer, prompts, ev.max_new_tokens, batch_size=self.batch_size,
                        do_sample=ev.temperature > 0, temperature=ev.temperature or 1.0, top_p=ev.top_p,
                        progress=False, stop=minimal_stops(stop))

    def close(self) -> None:
        self._loaded = None
        try:
            import torch  # heavy: loaded on first use

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:
            pass


class ServedModel:
    """A model behind the OpenAI-compatible endpoint; failed requests come back as None."""

    def __init__(self, endpoint: Any, concurrency: int = 16):
        self.endpoint = endpoint
        self.name = endpoint.name
        self.chunk = 4 * concurrency
        self.backend = OpenAIBackend(endpoint, concurrency=concurrency)
        self.errors: list[str] = []

    @property
    def fingerprint(self) -> dict[str, Any]:
        route = {"mode": self.endpoint.mode} if self.endpoint.mode != "chat" else {}  # another prompt, other answers
        return {"served": self.endpoint.name, "base_url": redact_url(self.endpoint.base_url), **route}  # no credential

    def complete(self, prompts: Sequence[str], ev: Any, stop: Sequence[str] = (),
                 sample_indices: Sequence[int] | None = None) -> list[str | None]:
        stops = minimal_stops(stop)
        sampled = ev.temperature > 0
        requests = [ChatRequest(key=str(i), messages=({"role": "user", "content": p},),
                                temperature=ev.temperature, top_p=ev.top_p if sampled else 1.0,
                                max_tokens=ev.max_new_tokens, sample_index=(sample_indices or [0] * len(prompts))[i],
                                stop=tuple(stops[:MAX_SERVER_STOPS])) for i, p in enumerate(prompts)]
        results = run_sync(self._all(requests))
        self.errors = [r.error for r in results.values() if not r.ok]
        stopped = self.backend.stopped_reason
        if stopped and stopped.startswith(REJECTED_PREFIX):  # every further request would fail the same way
            raise rejected_error(stopped)
        return [cut_at_stop(r.text, stops) if (r := results.get(str(i))) is not None and r.ok else None
                for i in range(len(prompts))]

    async def _all(self, requests: list) -> dict[str, Any]:
        """Every result by key; the connections are closed on the loop that opened them."""
        try:
            return {r.key: r async for r in self.backend.stream(requests)}
        finally:
            await self.backend.aclose()

    def close(self) -> None:
        pass
