"""What the tiny run's rewards read: the counterfactual probes and reward-against-truth, side by side, for the
PRM as trained (last label after the answer), the same PRM retrained with the labelling of before issue 16
(last label before the answer), the step verifier, and the IRM.

    .venv/bin/python benchmarks/bench_reward_truth.py RUN_DIR [--params params/tiny-cpu.toml]

RUN_DIR is a finished tiny run (``base.output_dir`` of ``rleif run``; 03_sft and 04_reward_models done).
The answer-blind PRM is retrained into a scratch copy (about 20 s on 2 cores); RUN_DIR is only read.
Reward against truth: rA of each PRM (and r = rI * rA with the run's IRM) on 500 sampled solutions to held-out
questions (``04_reward_models/prm_samples.jsonl``), judged right or wrong by the final answer.
Writes reports/bench/reward_truth.json and prints one line per probe.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.checks.probes import irm_probes, prm_probes  # noqa: E402
from rleif_kit.core.metrics import truth_figures  # noqa: E402
from rleif_kit.core.config import load_config  # noqa: E402
from rleif_kit.core.jsonl import read_jsonl  # noqa: E402
from rleif_kit.core.paths import RunPaths  # noqa: E402
from rleif_kit.core.reward_formula import parse_reward_formula  # noqa: E402
from rleif_kit.rewards.rm_datasets import split_by_question  # noqa: E402
from rleif_kit.rewards.reward import irm_scorer, load_rm, prm_scorer, step_verifier_scorer  # noqa: E402
from rleif_kit.rewards.prm import train_prm, verifier_examples  # noqa: E402
from rleif_kit.worlds import steps as step_labels  # noqa: E402
from rleif_kit.checks.probe_sets import instruction_probe_pairs, probe_solutions  # noqa: E402
from rleif_kit.worlds import get_world  # noqa: E402


def probe_rows(verdicts) -> dict:
    return {v.check.split("_probe_")[1]: {"status": v.status, **v.numbers} for v in verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir")
    ap.add_argument("--params", default=str(ROOT / "params" / "tiny-cpu.toml"))
    ap.add_argument("--truth-samples", type=int, default=500)
    args = ap.parse_args()
    run = Path(args.run_dir).resolve()
    cfg = load_config(args.params, [f'base.output_dir="{run}"'], workdir=ROOT)
    paths, d, rm = RunPaths(run), cfg.diagnostics, cfg.reward_model
    solutions, pairs = probe_solutions(cfg, paths), instruction_probe_pairs(cfg, paths)
    samples = list(read_jsonl(paths.prm_samples))
    held = split_by_question(samples, rm.rm_heldout_share, cfg.base.seed)[1][: args.truth_samples]
    records = [{"id": s["id"], "text": s["question"], "problem": s["problem"]} for s in held]
    texts = [s["solution"] for s in held]
    correct = [get_world("arith").is_correct(r, t) for r, t in zip(records, texts)]
    irm = irm_scorer(*load_rm(paths.irm_model), max_length=rm.rm_max_len)
    ri = irm([r["text"] for r in records])
    formula = parse_reward_formula(cfg.ppo.reward_formula)
    out: dict = {"run": str(run), "probe_solutions": len(solutions), "truth_samples": len(held),
                 "right_share": sum(bool(c) for c in correct) / len(correct), "rewards": {}}

    def measure(name: str, score, model: str = "PRM") -> None:
        t0 = time.perf_counter()
        ra = [0.0 if a is None else a for a in score(records, texts)]
        out["rewards"][name] = {
            "probes": probe_rows(prm_probes(score, solutions, d, seed=cfg.base.seed, model=model)),
            "truth_rA": truth_figures(correct, ra),
            "truth_r": truth_figures(correct, [formula(i, a) for i, a in zip(ri, ra)]),
            "seconds": round(time.perf_counter() - t0, 1)}

    measure("prm", prm_scorer(*load_rm(paths.prm_model), rm.prm_aggregate, max_len=rm.rm_max_len))
    measure("verifier", step_verifier_scorer(get_world("arith")), model="verifier")
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "run"
        for part in ("03_sft", "arith"):
            shutil.copytree(run / part, copy / part)
        (copy / "04_reward_models").mkdir()
        shutil.copy(paths.prm_samples, copy / "04_reward_models")
        blind_cfg = load_config(args.params, [f'base.output_dir="{copy}"'], workdir=ROOT)
        step_labels.LABEL_AFTER_ANSWER = False  # the labelling of before issue 16, in training and scoring
        try:
            examples, _ = verifier_examples(samples)
            model, tok, result = train_prm(blind_cfg, RunPaths(copy), examples)
            measure("prm_answer_blind", prm_scorer(model, tok, rm.prm_aggregate, max_len=rm.rm_max_len))
            out["rewards"]["prm_answer_blind"]["step_auc"] = result.step_auc
        finally:
            step_labels.LABEL_AFTER_ANSWER = True
    out["irm_probes"] = probe_rows(irm_probes(irm, pairs, d, seed=cfg.base.seed))
    path = ROOT / "reports" / "bench" / "reward_truth.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2) + "\n")
    for name, r in out["rewards"].items():
        print(f"{name}: rA AUC vs truth {r['truth_rA']['auc']:.3f}, r AUC {r['truth_r']['auc']:.3f}")
        for probe, p in r["probes"].items():
            print(f"  {probe:14s} {p['status']:4s} moved right {p['moved_right']:.1%} of {p['pairs']}, "
                  f"mean change {p['mean_change']:+.3f} ({p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f})")
    for probe, p in out["irm_probes"].items():
        print(f"irm {probe:14s} {p['status']:4s} moved right {p['moved_right']:.1%}, mean change {p['mean_change']:+.3f}")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
