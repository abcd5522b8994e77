"""Chat completions from a local transformers model, behind the same surface as the API backend.

Why: the CPU demo and offline runs evolve instructions and judge with a local model; the engine
must not care which backend answers.  Generation is batched and runs in a worker thread
(``asyncio.to_thread``), so the event loop stays responsive.

Requests are grouped by sampling parameters (temperature, top_p, max_tokens, stop), because one
``model.generate`` call uses one setting for its whole batch: a group is generated as soon as it
holds ``batch_size`` requests, and what is left is generated when the input ends.

Token counts are exact: prompt tokens from the attention mask, completion tokens from the
generated ids (see ``_generate`` for why this does not reuse ``models.generation``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any, AsyncIterable, AsyncIterator, Callable, Iterable

from rleif_kit.core.text import stop_index
from rleif_kit.llm.base import ChatRequest, ChatResult, Usage, aiter_requests, run_sync

__all__ = ["HFBackend", "messages_to_prompt"]


class HFBackend:
    """Local generation with the model saved at ``model_path`` (loaded on first use).

    The caller says how the model and the tokenizer are loaded (``load_model``, ``load_tokenizer``: the kit's
    ``models/loading.py``, which answer a hub id out of reach in one line, and fill Llama's missing pad token)
    and how an instruction becomes a prompt for a model without a chat template (``prompt_format``: the Alpaca
    format the kit fine-tunes on), so this layer knows no model or world.
    """

    def __init__(self, model_path: str, *, load_model: Callable[[str], Any], load_tokenizer: Callable[[str], Any],
                 prompt_format: Callable[[str], str], batch_size: int = 16, device: str | None = None):
        if not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
        self.model = str(model_path)
        self.load_model, self.load_tokenizer, self.prompt_format = load_model, load_tokenizer, prompt_format
        self.batch_size = batch_size
        self.device = device
        self.usage = Usage(cost_usd=None)  # no price for a local model: cost unknown, not $0
        self.stopped_reason: str | None = None  # no budgets here; kept for the shared surface
        self._loaded: tuple[Any, Any] | None = None

    async def stream(self, requests: Iterable[ChatRequest] | AsyncIterable[ChatRequest]) -> AsyncIterator[ChatResult]:
        """Yield one result per request, batch by batch (order within the input is not kept)."""
        groups: dict[tuple, list[ChatRequest]] = {}
        async for request in aiter_requests(requests):
            group = groups.setdefault(_sampling_key(request), [])
            group.append(request)
            if len(group) >= self.batch_size:
                del groups[_sampling_key(request)]
                for result in await asyncio.to_thread(self._run_batch, group):
                    yield result
        for group in groups.values():
            for result in await asyncio.to_thread(self._run_batch, group):
                yield result

    async def acomplete(self, request: ChatRequest) -> ChatResult:
        """One request; concurrent callers are gathered into batches (a short wait fills a batch).

        Why: the evolution engine awaits requests one job at a time; generating them one by one
        would waste the batched forward pass that makes local generation affordable.
        """
        loop = asyncio.get_running_loop()
        if getattr(self, "_queue_loop", None) is not loop:
            self._queue, self._queue_loop, self._worker = asyncio.Queue(), loop, None
        future = loop.create_future()
        self._queue.put_nowait((request, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        """Collect queued requests into same-sampling batches and run them in a worker thread."""
        while not self._queue.empty():
            await asyncio.sleep(0.02)  # let concurrent callers enqueue, so batches fill up
            pending: list[tuple[ChatRequest, asyncio.Future]] = []
            while not self._queue.empty() and len(pending) < self.batch_size:
                pending.append(self._queue.get_nowait())
            groups: dict[tuple, list[tuple[ChatRequest, asyncio.Future]]] = {}
            for item in pending:
                groups.setdefault(_sampling_key(item[0]), []).append(item)
            for items in groups.values():
                results = await asyncio.to_thread(self._run_batch, [r for r, _ in items])
                for (_, future), result in zip(items, results):
                    if not future.done():
                        future.set_result(result)

    def complete(self, requests: Iterable[ChatRequest]) -> list[ChatResult]:
        """Synchronous :meth:`stream`, results in input order."""
        requests = list(requests)
        # Positional keys, so repeated record keys (k samples of one record) map back exactly.
        indexed = [replace(r, key=str(i)) for i, r in enumerate(requests)]

        async def collect() -> list[ChatResult]:
            return [r async for r in self.stream(indexed)]

        results = sorted(run_sync(collect()), key=lambda r: int(r.key))
        return [replace(result, key=request.key) for result, request in zip(results, requests)]

    async def aclose(self) -> None:
        """Drop the model (frees its memory once nothing else holds it)."""
        self._loaded = None

    # ------------------------------------------------------------------ internals (worker thread)

    def _load(self) -> tuple[Any, Any]:
        """Model and tokenizer, loaded once; a bad path raises (a config error, not a failed request)."""
        if self._loaded is None:
            import torch  # heavy: loaded on first use

            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            tokenizer = self.load_tokenizer(self.model)
            model = self.load_model(self.model).to(device)
            self._loaded = (model, tokenizer)
        return self._loaded

    def _run_batch(self, batch: list[ChatRequest]) -> list[ChatResult]:
        model, tokenizer = self._load()
        prompts = [messages_to_prompt(r.messages, tokenizer, self.prompt_format) for r in batch]
        start = time.perf_counter()
        try:
            rows = _generate(model, tokenizer, prompts, batch[0])
        except Exception as exc:  # e.g. out of memory: these requests failed, the run goes on
            error = f"{type(exc).__name__}: {exc}"[:300]
            rows = [(None, 0, 0, None)] * len(batch)
        else:
            error = None
        latency = time.perf_counter() - start  # every request in the batch waited for all of it
        results = []
        for request, (text, prompt_tokens, completion_tokens, finish_reason) in zip(batch, rows):
            cut = _cut_at_stop(text, request.stop) if text is not None else None
            if cut is not None:
                text, finish_reason = cut, "stop"
            results.append(ChatResult(request.key, text, error, finish_reason, prompt_tokens, completion_tokens,
                                      self.model, latency))
            self.usage.add(results[-1], None)
        return results


def _generate(model: Any, tokenizer: Any, prompts: list[str], params: ChatRequest) -> list[tuple]:
    """One batch: ``(text, prompt_tokens, completion_tokens, finish_reason)`` per prompt.

    Why not ``models.generation.generate``: it returns decoded text only, and re-encoding text
    is not a token count (a byte-level BPE re-encodes partial characters differently); here the
    counts come from the generated ids.  Completion tokens run up to the first EOS / padding;
    they are generated tokens, stop strings included, as API providers count them.
    """
    import torch  # heavy: loaded on first use

    tokenizer.padding_side = "left"  # every row's new tokens start at the same column
    enc = tokenizer(prompts, return_tensors="pt", padding=True).to(model.device)
    sampling: dict[str, Any] = {"do_sample": False}
    if params.temperature > 0:
        sampling = {"do_sample": True, "temperature": params.temperature, "top_p": params.top_p}
    if params.stop:
        sampling.update(stop_strings=list(params.stop), tokenizer=tokenizer)
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=params.max_tokens, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id, **sampling)
    ends = {tokenizer.eos_token_id, tokenizer.pad_token_id} - {None}
    rows = []
    for ids, prompt_tokens in zip(out[:, enc["input_ids"].shape[1]:].tolist(), enc["attention_mask"].sum(1).tolist()):
        n = next((i for i, t in enumerate(ids) if t in ends), len(ids))
        finish = "stop" if n < len(ids) or n < params.max_tokens else "length"
        rows.append((tokenizer.decode(ids[:n], skip_special_tokens=True), int(prompt_tokens), n, finish))
    return rows


def messages_to_prompt(messages: Iterable[dict], tokenizer: Any, prompt_format: Callable[[str], str]) -> str:
    """The tokenizer's chat template when it has one, else ``prompt_format`` of the user turns.

    Why that fallback: the base models RLEIF starts from have no chat template, and Alpaca (``worlds/prompts.py``)
    is the format they are fine-tuned on. The tiny model ``rleif build-tiny`` writes has one (``models/tiny.py``
    ``CHAT_TEMPLATE``, so a chat server can serve it) that writes this fallback's prompt character for character.
    """
    messages = list(messages)
    if getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        bos = tokenizer.bos_token
        # generate() tokenizes with special tokens, so a BOS the template wrote would appear twice.
        if bos and prompt.startswith(bos) and tokenizer("")["input_ids"][:1] == [tokenizer.bos_token_id]:
            prompt = prompt[len(bos):]
        return prompt

    instruction = "\n\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")
    return prompt_format(instruction)


def _sampling_key(request: ChatRequest) -> tuple:
    """Requests that may share one generate() call; top_p does not matter for greedy decoding."""
    if request.temperature <= 0:
        return (0.0, 1.0, request.max_tokens, request.stop)
    return (request.temperature, request.top_p, request.max_tokens, request.stop)


def _cut_at_stop(text: str, stop: tuple[str, ...]) -> str | None:
    """``text`` up to the earliest stop string, or None when none occurs (then the reply was not stopped)."""
    i = stop_index(text, stop)
    return None if i is None else text[:i]

