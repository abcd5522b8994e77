"""Which reward does PPO climb best: the learned one, the verifier, or both? ``rI * rA``, ``rI * rV`` and
``rI * rA * rV`` side by side from the same SFT model and reward models, the same steps and seed.

    .venv/bin/python benchmarks/bench_reward_terms.py [--presets tiny-cpu tiny-math] [--formulas "rI * rA" ...]

Each preset starts from a finished run of ``tools/measure_spread.py`` (``reports/spread/<preset>/pinned-s42/``):
its 01-04 artifacts are copied to ``reports/terms/<preset>/<formula>/`` and 05_ppo and 06_eval rerun there with
rA from the learned PRM (``answer_reward = "prm"``), the formula under test and ``[ppo] force = true`` (the tiny
learned reward fails its gate, and the point is to see what PPO makes of it). For each: the greedy A/B of
06 (PPO minus SFT on the held-out or test items, with its 95% paired-bootstrap interval), the reward-vs-truth AUC
of r over PPO's rollouts (mean over the last fifth of the steps), the mean of each term and the share of records
the verifier could not judge. Writes reports/bench/reward_terms.json and prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench_common import last_fifth  # noqa: E402
from conftest import math_overrides, tiny_overrides  # noqa: E402 - how the tests point a preset at a folder
from rleif_kit.core.config import load_config  # noqa: E402
from rleif_kit.core.jsonl import read_jsonl, write_jsonl  # noqa: E402
from rleif_kit.core.paths import RunPaths  # noqa: E402
from rleif_kit.core.settings import load_settings  # noqa: E402
from rleif_kit.pipeline.runner import run_pipeline  # noqa: E402
from rleif_kit.worlds import world_for  # noqa: E402

PRESETS = {"tiny-cpu": ROOT / "params" / "tiny-cpu.toml", "tiny-math": ROOT / "params" / "tiny-math.toml"}
FORMULAS = ("rI * rA", "rI * rV", "rI * rA * rV")
LATER = ("05_ppo", "06_eval", "07_reward_diagnostics")


def _slug(formula: str) -> str:
    return formula.replace(" ", "").replace("*", "x")


def _copy(src: Path, dst: Path) -> None:
    """The source run without its 05-07 (so they rerun) and without old done markers of those stages."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*LATER), symlinks=True)


def _overrides(preset: str, root: Path, formula: str) -> list[str]:
    run = root / "run"
    base = tiny_overrides(run) if preset == "tiny-cpu" else math_overrides(root)
    return [*base, f'ppo.reward_formula="{formula}"', 'reward_model.answer_reward="prm"', "ppo.force=true"]


def measure(preset: str, formula: str) -> dict:
    src = ROOT / "reports" / "spread" / preset / "pinned-s42"
    root = ROOT / "reports" / "terms" / preset / _slug(formula)
    _copy(src, root)
    settings = root / "run" / "teacher-settings.json"
    settings_path = str(settings) if settings.exists() else None
    overrides = _overrides(preset, root, formula)
    cfg = load_config(PRESETS[preset], overrides, workdir=ROOT)
    paths = RunPaths(output_dir=cfg.output_dir)
    probes = world_for(cfg).build_probe_set(cfg, paths, load_settings(settings_path) if settings_path else None)
    if probes is not None:  # runs made before the data step wrote it: the math world's probe set
        write_jsonl(paths.probe_set, probes[0])
    start = time.perf_counter()
    run_pipeline(str(PRESETS[preset]), "05_ppo,06_eval", overrides, settings_path=settings_path,
                 report_dir=str(root / "reports"))
    seconds = time.perf_counter() - start
    log = list(read_jsonl(paths.ppo_log))
    ab = json.loads(paths.eval_summary.read_text())["ab"]
    bench, verdict = next(iter(ab.items()))
    gate = json.loads(paths.ppo_gate.read_text())
    return {"preset": preset, "formula": formula, "benchmark": bench, **verdict["numbers"], "ab": verdict["status"],
            "r_truth_auc_last_fifth": last_fifth(log, "r_truth_auc"),
            "rA_truth_auc_last_fifth": last_fifth(log, "rA_truth_auc"),
            "rV_mean": last_fifth(log, "rV_mean"), "rV_missing_share": last_fifth(log, "rV_missing_share"),
            "reward_first": log[0]["reward_mean"] if log else None,
            "reward_last": log[-1]["reward_mean"] if log else None,
            "steps": len(log), "gate_fails": [v["check"] for v in gate if v["status"] == "fail"], "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=list(PRESETS))
    parser.add_argument("--formulas", nargs="+", default=list(FORMULAS))
    args = parser.parse_args(argv)
    rows = []
    for preset in args.presets:
        for formula in args.formulas:
            rows.append(measure(preset, formula))
            print(json.dumps(rows[-1]), flush=True)
    out = ROOT / "reports" / "bench" / "reward_terms.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": rows, "source": "reports/spread/<preset>/pinned-s42"}, indent=1) + "\n")
    print(f"\n{'preset':<10} {'formula':<14} {'gain':>6}  {'95% interval':<16} {'r-truth AUC':>11} {'rV missing':>10}")
    for r in rows:
        lo, hi = r["ci95"]
        auc = r["r_truth_auc_last_fifth"]
        miss = r["rV_missing_share"]
        print(f"{r['preset']:<10} {r['formula']:<14} {100 * r['gain']:>+6.1f}  [{100 * lo:+.1f}, {100 * hi:+.1f}]"
              f"{'':<3} {auc if auc is None else round(auc, 3)!s:>11} {'' if miss is None else f'{miss:.0%}':>10}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
