"""The SFT examples: every one a ``prompt`` (the Alpaca / WizardMath prompt the evaluation uses) and a
``completion`` (the response), both in the world's training format (``World.train_prompt``), so the trainer puts
the loss on the response only; ``instruction`` is kept beside
the prompt for readers (the model card's example)."""

from __future__ import annotations

import random

from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.worlds.data import open_domain_sample, stepwise_rows
from rleif_kit.worlds import world_for


def build_sft_examples(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """Prompt/completion examples for SFT, shuffled with the run's seed, saved to ``paths.sft_data``.

    From ``02_dedup/sft.jsonl`` when 02_dedup has run; otherwise straight from ``[sft].dataset`` and
    the open-domain file, so SFT also runs on its own.
    """
    if paths.sft_rows.exists():
        rows = list(read_jsonl(paths.sft_rows))
    else:
        rows = ([{**r, "source": "stepwise"} for r in stepwise_rows(cfg, paths)]
                + [{**r, "source": "open_domain"} for r in open_domain_sample(cfg)])
    cot, world = cfg.eval.cot_prompt, world_for(cfg)
    examples = [{"id": r["id"], "source": r["source"], "instruction": r["instruction"],
                 **({"input": r["input"]} if r.get("input") else {}),
                 "prompt": world.train_prompt(r["instruction"], cot=cot, input=r.get("input") or ""),
                 "completion": world.completion(r["response"])} for r in rows]
    random.Random(cfg.base.seed).shuffle(examples)
    write_jsonl(paths.sft_data, examples)
    return examples
