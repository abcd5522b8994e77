"""What SFT's data path costs on the tiny preset, the kit's way against TRL's, side by side in one run (issue 32).

    .venv/bin/python benchmarks/bench_sft_batches.py [--run rleif_output/tiny-cpu] [--steps 20] [--repeats 3]

``--run``: a finished tiny-cpu run (its ``03_sft/train.jsonl`` and tokenizer are read, nothing is written there).

- **Tokenization**: SFTTrainer's preparation of the 30,615 examples from prompt-completion rows (TRL tokenizes one
  example at a time) against ``sft/tokenize.py`` (in batches) followed by SFTTrainer's preparation of the tokenized
  rows; the same tokens either way (tests/test_sft.py). Median seconds of ``--repeats``, interleaved.
- **Padding share**: tokens computed per real token over the preset's 500 steps of 64 examples, for random batches
  of 64 and for balanced micro-batches (16 x 4, transformers' BatchRebalanceSampler; ``[sft] balance_batches``).
  Exact counts, no timing.
- **Seconds per step**: ``--steps`` optimizer steps of the preset's SFT (full fine-tuning, 2 threads, pinned
  kernels) with random batches of 64 and with balanced 16 x 4, each in a fresh process, median of ``--repeats``
  (the first step left out).

Writes reports/bench/sft_batches.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import child_json, pin_kernels, write_result  # noqa: E402 - beside this script
SAMPLINGS = {"random-64": ["sft.batch_size=64", "sft.grad_accum=1", "sft.balance_batches=false"],
             "balanced-16x4": ["sft.batch_size=16", "sft.grad_accum=4", "sft.balance_batches=true"]}


def _config(run: Path, work: Path, extra: list[str]):
    from rleif_kit.core.config import load_config

    return load_config(str(ROOT / "params" / "tiny-cpu.toml"),
                       [f'base.output_dir="{work}"', f'base.model_name="{run / "tiny-llama"}"', "base.report_to=[]",
                        *extra], workdir=ROOT)


def _examples(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "03_sft" / "train.jsonl").read_text().splitlines()]


def _trainer(cfg, work: Path, model, tokenizer, data):
    from trl import SFTTrainer

    from rleif_kit.core.paths import RunPaths
    from rleif_kit.sft.stage import _seeded_sampler, _trainer_args

    trainer = SFTTrainer(model=model, args=_trainer_args(cfg, RunPaths(work), False), train_dataset=data,
                         processing_class=tokenizer)
    _seeded_sampler(trainer, cfg.base.seed)
    return trainer


def tokenization(run: Path, repeats: int) -> tuple[dict, list[int]]:
    """Seconds from prompt-completion rows to SFTTrainer's prepared dataset, TRL alone and ours then TRL; and the
    examples' lengths in tokens."""
    from datasets import Dataset
    from transformers import AutoModelForCausalLM

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.sft.tokenize import tokenized_examples

    examples = _examples(run)
    work = Path(tempfile.mkdtemp(prefix="bench-sft-"))
    cfg = _config(run, work, [])
    tokenizer = load_tokenizer(str(run / "tiny-llama"))
    model = AutoModelForCausalLM.from_pretrained(str(run / "tiny-llama"))
    times: dict[str, list[float]] = {"trl": [], "kit": []}
    ours: dict[str, list] = {}
    for _ in range(repeats):
        for way in times:
            start = time.perf_counter()
            if way == "kit":
                ours = tokenized_examples(tokenizer, examples)
                data = Dataset.from_dict(ours)
            else:
                data = Dataset.from_list([{"prompt": e["prompt"], "completion": e["completion"]} for e in examples])
            _trainer(cfg, work, model, tokenizer, data)
            times[way].append(time.perf_counter() - start)
    medians = {f"{way}_s": round(statistics.median(t), 2) for way, t in times.items()}
    return {"examples": len(examples), **medians}, [len(ids) for ids in ours["input_ids"]]


def padding(lengths: list[int], steps: int = 500, batch: int = 64, parts: int = 4, seed: int = 42) -> dict:
    """Tokens computed per real token over ``steps`` steps of examples of ``lengths`` tokens: random batches of
    ``batch`` against balanced ones."""
    import torch
    from transformers.trainer_pt_utils import BatchRebalanceSampler

    generator = torch.Generator()
    generator.manual_seed(seed)
    order = torch.randperm(len(lengths), generator=generator).tolist()
    rows = [order[(s * batch) % len(order):][:batch] for s in range(steps)]
    real = sum(lengths[i] for r in rows for i in r)
    random_computed = sum(len(r) * max(lengths[i] for i in r) for r in rows)
    sampler = BatchRebalanceSampler(lengths, batch, 1, parts, seed=seed)
    micro = [mb for _, mb in zip(range(steps * parts), iter(sampler))]
    balanced_real = sum(lengths[i] for mb in micro for i in mb)
    balanced_computed = sum(len(mb) * max(lengths[i] for i in mb) for mb in micro)
    return {"steps": steps, "mean_length": round(statistics.mean(lengths), 1),
            "random": round(random_computed / real, 3), "balanced": round(balanced_computed / balanced_real, 3)}


def _child(sampling: str, run: Path, steps: int, out: Path) -> None:
    """One sampling's ``steps`` steps in this (fresh) process: seconds per step to ``out``."""
    pin_kernels()
    from transformers import AutoModelForCausalLM, TrainerCallback

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.sft.tokenize import tokenized_examples
    from datasets import Dataset

    work = Path(tempfile.mkdtemp(prefix="bench-sft-"))
    cfg = _config(run, work, [*SAMPLINGS[sampling], f"sft.max_steps={steps}", f"sft.save_steps={steps * 10}"])
    tokenizer = load_tokenizer(str(run / "tiny-llama"))
    tokenizer.padding_side = "right"
    data = Dataset.from_dict(tokenized_examples(tokenizer, _examples(run)))
    trainer = _trainer(cfg, work, AutoModelForCausalLM.from_pretrained(str(run / "tiny-llama")), tokenizer, data)
    marks: list[float] = []

    class Marks(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append(time.perf_counter())

    trainer.add_callback(Marks())
    trainer.train()
    out.write_text(json.dumps([b - a for a, b in zip(marks, marks[1:])]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="rleif_output/tiny-cpu", help="a finished tiny-cpu run folder")
    parser.add_argument("--steps", type=int, default=20, help="SFT steps per timed run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    run = Path(args.run).resolve()
    if args.child:
        return _child(args.child, run, args.steps, Path(args.out))
    if not (run / "03_sft" / "train.jsonl").exists() or not (run / "tiny-llama").is_dir():
        raise SystemExit(f"bench_sft_batches: {run} is not a finished tiny-cpu run "
                         "(make demo makes rleif_output/tiny-cpu)")
    per_step: dict[str, list[float]] = {s: [] for s in SAMPLINGS}
    for r in range(args.repeats):
        for sampling in SAMPLINGS:
            per_step[sampling] += child_json(__file__, ["--child", sampling, "--run", str(run), "--steps",
                                                         str(args.steps)], quiet=True)
            print(f"round {r + 1}/{args.repeats} {sampling}: median {statistics.median(per_step[sampling]):.3f} s/step",
                  flush=True)
    pin_kernels()
    timed, lengths = tokenization(run, args.repeats)
    result = {"run": args.run, "machine": "2 threads, pinned kernels",
              "seconds_per_step": {s: round(statistics.median(v), 3) for s, v in per_step.items()},
              "padding": padding(lengths), "tokenization": timed}
    sps = result["seconds_per_step"]
    result["balanced_vs_random"] = round(sps["balanced-16x4"] / sps["random-64"], 3)
    write_result("sft_batches", result)


if __name__ == "__main__":
    main()
