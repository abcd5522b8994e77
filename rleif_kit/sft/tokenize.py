"""The SFT examples tokenized as TRL's ``SFTTrainer`` tokenizes a prompt-completion dataset, but in batches.

TRL tokenizes one example at a time, twice (the prompt, then prompt + completion), through ``datasets.map``; a fast
tokenizer takes a list at once. For the tiny preset's 30,615 examples on 2 cores, preparing them for the trainer took
15.8 s from prompt-completion rows and 7.8 s this way (benchmarks/bench_sft_batches.py). The result is TRL's own:
the completion ends with the tokenizer's EOS (added when missing), ``input_ids`` is the tokenized prompt +
completion, and ``labels`` are -100 over the prompt, that is over the tokens the tokenized prompt shares with it
(TRL's ``common_prefix_length``), so the loss is on the response only. ``SFTTrainer`` takes such a dataset as
already processed (it only truncates it to ``max_length`` and drops rows without a label); tests/test_sft.py
compares the two token for token.
"""

from __future__ import annotations

from typing import Any, Sequence


def tokenized_examples(tokenizer: Any, examples: Sequence[dict], batch: int = 4096) -> dict[str, list]:
    """Columns ``input_ids`` and ``labels`` for ``examples`` (each a ``prompt`` and a ``completion``)."""
    from trl.data_utils import common_prefix_length  # heavy: loaded on first use

    eos = tokenizer.eos_token
    input_ids: list[list[int]] = []
    labels: list[list[int]] = []
    for start in range(0, len(examples), batch):
        chunk = examples[start:start + batch]
        completions = [e["completion"] if eos is None or e["completion"].endswith(eos) else e["completion"] + eos
                       for e in chunk]
        prompts = tokenizer([e["prompt"] for e in chunk])["input_ids"]
        full = tokenizer([e["prompt"] + c for e, c in zip(chunk, completions)])["input_ids"]
        for p, f in zip(prompts, full):
            n = common_prefix_length(p, f)
            input_ids.append(f)
            labels.append([-100] * n + f[n:])
    return {"input_ids": input_ids, "labels": labels}
