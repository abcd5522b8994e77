"""Batched generation with a local transformers model (greedy by default)."""

from __future__ import annotations

import importlib.util
from contextlib import contextmanager
from typing import Any, Iterator, Sequence

from rleif_kit.core.text import cut_at_stop


def generate(model: Any, tokenizer: Any, prompts: Sequence[str], max_new_tokens: int, batch_size: int = 16,
             desc: str = "generating", do_sample: bool = False, temperature: float = 1.0,
             top_p: float = 1.0, progress: bool = True, stop: Sequence[str] = ()) -> list[str]:
    """One completion per prompt, decoded without the prompt and without special tokens.

    Prompts are left-padded so every row's new tokens start at the same column; generation stops at
    EOS, or at the first of the ``stop`` strings (a row stops there; the text is cut before it, as
    vLLM and OpenAI-compatible servers do, so local and served results read the same). The model's
    train/eval mode is restored afterwards.
    """
    import torch  # heavy: loaded on first use
    from tqdm.auto import tqdm  # heavy: loaded on first use

    was_training = model.training
    model.eval()
    tokenizer.padding_side = "left"
    device = next(model.parameters()).device
    outputs: list[str] = []
    sampling = {"do_sample": True, "temperature": temperature, "top_p": top_p} if do_sample else {"do_sample": False}
    stop = [s for s in stop if s]
    if stop:
        sampling.update(stop_strings=stop, tokenizer=tokenizer)
    bar = tqdm(total=len(prompts), desc=desc, disable=not progress)
    try:
        for start in range(0, len(prompts), batch_size):
            batch = list(prompts[start:start + batch_size])
            enc = tokenizer(batch, return_tensors="pt", padding=True).to(device)
            with torch.no_grad():
                out = model.generate(**enc, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                     eos_token_id=tokenizer.eos_token_id, **sampling)
            new = out[:, enc["input_ids"].shape[1]:]
            outputs.extend(cut_at_stop(text, stop) for text in tokenizer.batch_decode(new, skip_special_tokens=True))
            bar.update(len(batch))
    finally:
        bar.close()
        model.train(was_training)
    return outputs


@contextmanager
def plain_sampling(model: Any) -> Iterator[None]:
    """Inside the block ``model.generate`` samples from softmax(logits / temperature) and nothing else.

    A checkpoint's own ``generation_config.json`` (``repetition_penalty``, ``min_new_tokens``, ``top_k`` ...) fills
    every setting a ``generate()`` call leaves unset; PPO's log-probs assume the plain distribution, so its
    sampler must not inherit those. The config is swapped on the innermost model (under a PEFT wrapper too).
    """
    from transformers import GenerationConfig  # heavy: loaded on first use

    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    saved = inner.generation_config
    inner.generation_config = GenerationConfig(bos_token_id=saved.bos_token_id, eos_token_id=saved.eos_token_id,
                                               pad_token_id=saved.pad_token_id)
    try:
        yield
    finally:
        inner.generation_config = saved


MISSING = ("{key} = 'vllm' needs the vllm package, which is not installed here: pip install vllm on a CUDA machine "
           "(it brings its own torch), or use the transformers backend")


class VLLMMissing(RuntimeError):
    """vLLM was asked for and is not installed (a user error: the message says what to do)."""


def require_vllm(key: str = "[eval] backend") -> None:
    """One clear line when vLLM is asked for and missing (checked where the setting is used)."""
    if importlib.util.find_spec("vllm") is None:
        raise VLLMMissing(MISSING.format(key=key))
