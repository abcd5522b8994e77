"""Solution-level or step-level reward in PPO: which does the policy learn more from? ``[ppo] reward_granularity``
"solution" (r on the last token) and "step" (r split over the steps, each part on the token where its step ends)
side by side from the same SFT model and reward models, 3 seeds each.

    .venv/bin/python benchmarks/bench_granularity.py --source tiny-cpu=DIR --source tiny-code=DIR [--seeds 1 2 3]

Each ``--source`` is a finished run of the preset (its ``base.output_dir``: 00-04 done). Its 01-04 artifacts are
copied to ``reports/granularity/<preset>/<granularity>-s<seed>/run`` and 05_ppo and 06_eval rerun there with
``base.seed`` = the seed (the PPO batches' order and the sampling; the SFT model and the reward models are the
source's), ``[ppo] force = true`` (both arms run whatever the gate says; its verdicts are recorded) and ``[ppo]
eval_samples = 0`` (06 holds the A/B). tiny-code's own formula ``rI * rV`` has no rA to split, so both of its arms
use ``rI * (0.5 * rA + 0.5 * rV)``: the PRM's half is what the step level moves. For each run: the greedy A/B of
06 (PPO minus SFT with its 95% paired-bootstrap interval), the KL per sequence and the reward-vs-truth AUC of r over
the last fifth of PPO's steps, the step columns of the log. Writes reports/bench/granularity.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_common import last_fifth  # noqa: E402
from rleif_kit.core.config import load_config  # noqa: E402
from rleif_kit.core.jsonl import read_jsonl  # noqa: E402
from rleif_kit.core.paths import RunPaths  # noqa: E402
from rleif_kit.pipeline.runner import run_pipeline  # noqa: E402

PRESETS = {"tiny-cpu": (ROOT / "params" / "tiny-cpu.toml", None),
           "tiny-code": (ROOT / "params" / "tiny-code.toml", "rI * (0.5 * rA + 0.5 * rV)")}
GRANULARITIES = ("solution", "step")
LATER = ("05_ppo", "06_eval", "07_reward_diagnostics")


def measure(preset: str, source: Path, granularity: str, seed: int) -> dict:
    params, formula = PRESETS[preset]
    root = ROOT / "reports" / "granularity" / preset / f"{granularity}-s{seed}"
    if root.exists():
        shutil.rmtree(root)
    shutil.copytree(source, root / "run", ignore=shutil.ignore_patterns(*LATER), symlinks=True)
    overrides = [f'base.output_dir="{root / "run"}"', f"base.seed={seed}", f'ppo.reward_granularity="{granularity}"',
                 "ppo.force=true", "ppo.eval_samples=0", *([f'ppo.reward_formula="{formula}"'] if formula else [])]
    cfg = load_config(params, overrides, workdir=ROOT)
    paths = RunPaths(output_dir=cfg.output_dir)
    start = time.perf_counter()
    run_pipeline(str(params), "05_ppo,06_eval", overrides, report_dir=str(root / "reports"))
    seconds = time.perf_counter() - start
    log = list(read_jsonl(paths.ppo_log))
    bench, verdict = next(iter(json.loads(paths.eval_summary.read_text())["ab"].items()))
    gate = json.loads(paths.ppo_gate.read_text())
    return {"preset": preset, "granularity": granularity, "seed": seed, "formula": cfg.ppo.reward_formula,
            "benchmark": bench, **verdict["numbers"], "ab": verdict["status"],
            **{f"{key}_last_fifth": last_fifth(log, key) for key in ("kl", "r_truth_auc", "right_share")},
            "reward_last_fifth": last_fifth(log, "reward_mean"),
            **{key: last_fifth(log, key) for key in ("steps_mean", "early_credit_mean", "steps_placed_share")},
            "reward_first": log[0]["reward_mean"] if log else None, "ppo_steps": len(log),
            "gate": {v["check"]: v["status"] for v in gate}, "seconds": round(seconds, 1)}


def summary(rows: list[dict]) -> list[dict]:
    """Per preset and granularity: the mean and the spread (min, max) over the seeds of each figure."""
    out = []
    for preset in dict.fromkeys(r["preset"] for r in rows):
        for g in GRANULARITIES:
            arm = [r for r in rows if r["preset"] == preset and r["granularity"] == g]
            if not arm:
                continue
            row = {"preset": preset, "granularity": g, "seeds": [r["seed"] for r in arm]}
            for key in ("gain", "kl_last_fifth", "r_truth_auc_last_fifth", "reward_last_fifth", "steps_mean",
                        "early_credit_mean"):
                values = [r[key] for r in arm if r.get(key) is not None]
                row[key] = ({"mean": statistics.fmean(values), "min": min(values), "max": max(values)}
                            if values else None)
            out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", action="append", required=True, metavar="PRESET=DIR",
                        help="a finished run of the preset (its output_dir), e.g. tiny-cpu=rleif_output/tiny-cpu")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--granularities", nargs="+", default=list(GRANULARITIES), choices=GRANULARITIES)
    args = parser.parse_args(argv)
    sources = dict(s.split("=", 1) for s in args.source)
    unknown = set(sources) - set(PRESETS)
    if unknown:
        parser.error(f"unknown preset {sorted(unknown)[0]!r}: one of {', '.join(PRESETS)}")
    out = ROOT / "reports" / "bench" / "granularity.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for preset, source in sources.items():
        for seed in args.seeds:
            for g in args.granularities:
                rows.append(measure(preset, Path(source).resolve(), g, seed))
                print(json.dumps(rows[-1]), flush=True)
                out.write_text(json.dumps({"rows": rows, "summary": summary(rows)}, indent=1) + "\n")  # per run
    print(f"\n{'preset':<10} {'granularity':<11} {'seed':>4} {'gain':>6}  {'95% interval':<16} {'KL':>6} "
          f"{'r-truth AUC':>11} {'steps':>5}")
    for r in rows:
        lo, hi = r["ci95"]
        auc, steps = r["r_truth_auc_last_fifth"], r["steps_mean"]
        print(f"{r['preset']:<10} {r['granularity']:<11} {r['seed']:>4} {100 * r['gain']:>+6.1f}  "
              f"[{100 * lo:+.1f}, {100 * hi:+.1f}]{'':<3} {r['kl_last_fifth']:>6.2f} "
              f"{'-' if auc is None else f'{auc:.3f}':>11} {'-' if steps is None else f'{steps:.2f}':>5}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
