"""SFT throughput of the three fine-tuning modes on the tiny model, side by side in one run.

    .venv/bin/python benchmarks/bench_sft.py [--steps 30] [--repeats 3]

Writes reports/bench/sft.json: per mode (full, lora, qlora) the median seconds per optimizer step
over the repeats, examples/s, and the ratio to full fine-tuning. On a CPU, QLoRA pays for
dequantising the 4-bit weights in every forward and backward pass; on a GPU it saves memory.
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

from rleif_kit.core.run_setup import setup  # noqa: E402

MODES = ("full", "lora", "qlora")


def time_mode(mode: str, steps: int, workdir: Path) -> dict:
    from rleif_kit.worlds.tiny_corpus import ensure_base_model
    from rleif_kit.sft.stage import train_sft
    from rleif_kit.sft.examples import build_sft_examples

    out = workdir / mode
    overrides = [f'base.output_dir="{out}"', f'base.model_name="{workdir}/tiny-llama"', f"sft.max_steps={steps}",
                 f'sft.finetune="{mode}"', "sft.eval_samples=0", 'sft.dataset="arith:3000"',
                 f"sft.save_steps={steps * 10}", "sft.gradient_checkpointing=false"]
    cfg, paths = setup(str(ROOT / "params" / "tiny-cpu.toml"), overrides, stage="03_sft",
                       report_dir=str(out / "reports"), workdir=str(ROOT))
    examples, base = build_sft_examples(cfg, paths), ensure_base_model(cfg)
    start = time.perf_counter()
    trainer, _, _ = train_sft(cfg, paths, examples, base)
    seconds = time.perf_counter() - start
    return {"seconds_per_step": seconds / steps,
            "examples_per_s": steps * cfg.sft.batch_size / seconds,
            "trainable_parameters": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.repeats):  # interleaved, so machine noise hits every mode alike
            for mode in MODES:
                runs[mode].append(time_mode(mode, args.steps, Path(tmp) / f"r{r}"))
                print(f"repeat {r + 1}: {mode}: {runs[mode][-1]['seconds_per_step']:.3f} s/step", flush=True)
    result = {}
    for mode in MODES:
        per_step = statistics.median(x["seconds_per_step"] for x in runs[mode])
        result[mode] = {"median_seconds_per_step": per_step,
                        "median_examples_per_s": statistics.median(x["examples_per_s"] for x in runs[mode]),
                        "trainable_parameters": runs[mode][0]["trainable_parameters"],
                        "runs_seconds_per_step": [x["seconds_per_step"] for x in runs[mode]]}
    for mode in MODES:
        result[mode]["time_ratio_to_full"] = result[mode]["median_seconds_per_step"] / result["full"]["median_seconds_per_step"]
    out = ROOT / "reports" / "bench" / "sft.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"steps": args.steps, "repeats": args.repeats, "modes": result}, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
