"""Seconds per PPO step and generated tokens per second: the kit's loop (with its speed-ups on and off) against
TRL's GRPOTrainer at the same rollout size, generation length and model, side by side in one run (issue 32).

    .venv/bin/python benchmarks/bench_ppo.py [--run rleif_output/tiny-cpu] [--steps 4] [--repeats 3]

``--run``: a finished run of the tiny preset (params/tiny-cpu.toml: its SFT model, reward models and instruction
pool are read, nothing in it is written; `make demo` makes one). Each variant runs ``--steps`` steps of 64
rollouts of up to 80 tokens in a fresh process on 2 threads with the preset's pinned kernels, the variants
interleaved over ``--repeats`` rounds so load drifts hit all alike; the first step of each run is warm-up and
left out. Variants:

- ``kit``: our PPO loop as the preset runs it (``[ppo] trim_padding`` on);
- ``kit-no-trim``: the same with every pass at the rollout's full width;
- ``trl-grpo``: TRL's GRPOTrainer through ``[ppo] algorithm = "grpo"`` (16 prompts x 4 generations = 64
  rollouts, the same LoRA, reward, learning rate, update passes and mini-batch).

Per variant: median seconds per step (= per 64 rollouts), median generated tokens per second of generation
(``generate`` timed alone), the kit's phase split and padding ratio. Writes reports/bench/ppo.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import child_json, pin_kernels, write_result  # noqa: E402 - beside this script
VARIANTS = ("kit", "kit-no-trim", "trl-grpo")
LINKED = ("00_setup", "01_evolve", "02_dedup", "03_sft", "04_reward_models", "arith", "tiny-llama")


def _child(variant: str, run: Path, steps: int, out: Path) -> None:
    """One variant's run, in this (fresh) process: writes its per-step figures to ``out``."""
    pin_kernels()  # before torch loads: the preset's kernels, 2 threads
    from rleif_kit.core.config import load_config
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.ppo.policy import load_policy
    from rleif_kit.rewards.reward import RewardScorer
    from rleif_kit.worlds.data import instruction_pool

    work = Path(tempfile.mkdtemp(prefix="bench-ppo-"))
    for name in LINKED:  # the run's inputs, read only; PPO writes into the scratch folder
        if (run / name).exists():
            os.symlink((run / name).resolve(), work / name)
    overrides = [f'base.output_dir="{work}"', f"ppo.total_steps={steps}", "base.report_to=[]",
                 f"ppo.trim_padding={'false' if variant == 'kit-no-trim' else 'true'}"]
    if variant == "trl-grpo":
        overrides += ['ppo.algorithm="grpo"', "ppo.num_generations=4"]
    cfg = load_config(str(run / "config.resolved.toml"), overrides, workdir=ROOT)
    paths = RunPaths(work)
    scorer = RewardScorer(cfg, paths)
    pool = instruction_pool(cfg, paths)
    gen = _time_generate()
    try:
        rows = _grpo_rows(cfg, paths, pool, scorer, gen) if variant == "trl-grpo" else \
            _kit_rows(cfg, paths, pool, scorer, load_policy(cfg, paths))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out.write_text(json.dumps(rows))


def _time_generate() -> list[tuple[float, int]]:
    """Wrap transformers' ``generate``: each call's (seconds, new tokens) is appended to the returned list."""
    from transformers.generation.utils import GenerationMixin

    calls: list[tuple[float, int]] = []
    real = GenerationMixin.generate

    def timed(self, *args, **kwargs):
        start = time.perf_counter()
        out = real(self, *args, **kwargs)
        ids = kwargs.get("input_ids", args[0] if args else None)
        seqs = out.sequences if hasattr(out, "sequences") else out
        pad = getattr(self.generation_config, "pad_token_id", None)
        new = seqs[:, ids.shape[1]:] if ids is not None else seqs
        calls.append((time.perf_counter() - start, int((new != pad).sum()) if pad is not None else new.numel()))
        return out

    GenerationMixin.generate = timed
    return calls


def _kit_rows(cfg, paths, pool, scorer, policy) -> list[dict]:
    from rleif_kit.ppo.trainer import train_ppo

    _, result = train_ppo(cfg, paths, pool, scorer, policy, gate=[], progress=False)
    keep = ("step_s", "generate_s", "policy_pass_s", "ref_pass_s", "reward_s", "update_s", "gen_tokens_per_s",
            "pad_ratio", "response_len")
    return [{k: r.get(k) for k in keep} for r in result.log]


def _grpo_rows(cfg, paths, pool, scorer, gen) -> list[dict]:
    """Per PPO-sized step of GRPO (``rollout_batch / mini_batch * ppo_epochs`` optimizer steps): its seconds and
    its generation's tokens per second, from a callback's timestamps and the timed ``generate``."""
    from transformers import TrainerCallback

    from rleif_kit.models import trainer_logs
    from rleif_kit.ppo.grpo import run_grpo

    ppo = cfg.ppo
    per_step = ppo.rollout_batch // ppo.mini_batch * ppo.ppo_epochs
    marks: list[tuple[float, int]] = []

    class Marks(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            marks.append((time.perf_counter(), len(gen)))

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % per_step == 0:
                marks.append((time.perf_counter(), len(gen)))

    real = trainer_logs.callbacks
    trainer_logs.callbacks = lambda *a, **k: [*real(*a, **k), Marks()]
    run_grpo(cfg, paths, pool, scorer, progress=False)
    rows = []
    for (t0, g0), (t1, g1) in zip(marks, marks[1:]):
        calls = gen[g0:g1]
        seconds, tokens = sum(c[0] for c in calls), sum(c[1] for c in calls)
        rows.append({"step_s": t1 - t0, "generate_s": seconds,
                     "gen_tokens_per_s": tokens / seconds if seconds else None,
                     "response_len": tokens / ppo.rollout_batch})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", default="rleif_output/tiny-cpu", help="a finished tiny-cpu run folder")
    parser.add_argument("--steps", type=int, default=4, help="PPO steps per run (the first is warm-up)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per variant, interleaved")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of " + ", ".join(VARIANTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    run = Path(args.run).resolve()
    if args.child:
        return _child(args.child, run, args.steps, Path(args.out))
    if not (run / "04_reward_models").is_dir() or not (run / "config.resolved.toml").exists():
        raise SystemExit(f"bench_ppo: {run} is not a finished tiny-cpu run (make demo makes rleif_output/tiny-cpu)")
    variants = [v for v in args.variants.split(",") if v]
    rows: dict[str, list[dict]] = {v: [] for v in variants}
    for r in range(args.repeats):
        for v in variants:
            start = time.perf_counter()
            got = child_json(__file__, ["--child", v, "--run", str(run), "--steps", str(args.steps)])
            rows[v] += got[1:]  # the first step is warm-up
            print(f"round {r + 1}/{args.repeats} {v}: {time.perf_counter() - start:.0f} s, steps "
                  + ", ".join(f"{x['step_s']:.2f}" for x in got), flush=True)
    result = {"run": args.run, "steps_per_run": args.steps, "repeats": args.repeats,
              "rollout": "64 rollouts of up to 80 new tokens, 2 threads, pinned kernels", "variants": {}}
    for v, rs in rows.items():
        med = lambda k: statistics.median([x[k] for x in rs if x.get(k) is not None]) if any(  # noqa: E731
            x.get(k) is not None for x in rs) else None
        result["variants"][v] = {k: round(m, 3) for k in ("step_s", "generate_s", "policy_pass_s", "ref_pass_s",
                                                          "reward_s", "update_s", "gen_tokens_per_s", "pad_ratio",
                                                          "response_len") if (m := med(k)) is not None}
        result["variants"][v]["steps_measured"] = len(rs)
    if "kit" in rows and "trl-grpo" in rows:
        k, g = result["variants"]["kit"], result["variants"]["trl-grpo"]
        result["kit_vs_grpo"] = {"seconds_per_64": round(g["step_s"] / k["step_s"], 2),
                                 "gen_tokens_per_s": round(k["gen_tokens_per_s"] / g["gen_tokens_per_s"], 2)}
    write_result("ppo", result)


if __name__ == "__main__":
    main()
