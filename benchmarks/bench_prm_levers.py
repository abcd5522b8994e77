"""Which lever makes the tiny learned PRM a reward PPO can climb (issue 29)? Each lever retrains the PRM half of
04 from the same SFT model and the same sampled solutions, then reads what the PRM reads.

    .venv/bin/python benchmarks/bench_prm_levers.py [--levers base hn2000 ...] [--ppo] [--source DIR]

The source is a finished pinned tiny-cpu run (``tools/measure_spread.py run --preset tiny-cpu``, by default
``reports/spread/tiny-cpu/pinned-s42/``). Per lever, in ``reports/prm_levers/<lever>/``: the source's 00-03 and its
IRM are copied, the PRM's sampled solutions too (a lever with more samples draws on from them: the first ones
are the same), the PRM is trained with the lever's overrides, and measured:

- the counterfactual probes of rA on the held-out problems (share moved the right way, mean change and its 95%
  interval, the verdict), as the gate and 07 run them;
- the step AUC and the solution AUC (rA against "every step right") on the held-out sampled solutions — the
  errors the policy really makes, none of them an edit;
- the seconds of each label source and of training.

With ``--ppo`` it then runs 05 and 06 on rI x rA from that PRM (``answer_reward = "prm"``; ``force`` so a
failing gate still lets the run show what PPO makes of it): the greedy gain over SFT on the 1,000 held-out
problems with its 95% paired-bootstrap interval and the reward-against-truth AUC of the first and last fifth of
the steps. Writes reports/bench/prm_levers.json and prints the table.
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
sys.path.insert(0, str(ROOT / "tests"))

from conftest import tiny_overrides  # noqa: E402 - how the tests point a preset at a folder
from rleif_kit.core import numerics  # noqa: E402

PRESET = ROOT / "params" / "tiny-cpu.toml"
LEVERS = {
    "base": [],
    "samples3000": ["reward_model.prm_samples=3000"],
    "hn1500": ["reward_model.prm_hard_negatives=1500"],
    "hn3000": ["reward_model.prm_hard_negatives=3000"],
    "hn3000+samples3000": ["reward_model.prm_hard_negatives=3000", "reward_model.prm_samples=3000"],
    "hn3000+epochs4": ["reward_model.prm_hard_negatives=3000", "reward_model.rm_epochs=4"],
    "layers1": ["reward_model.prm_extra_layers=1"],
    "lik": ['reward_model.prm_head="likelihood"'],
    "lik-lr1e-4": ['reward_model.prm_head="likelihood"', "reward_model.rm_lr=1e-4"],
    "lik+hn3000": ['reward_model.prm_head="likelihood"', "reward_model.prm_hard_negatives=3000"],
    "lik+hn3000+same": ['reward_model.prm_head="likelihood"', "reward_model.prm_hard_negatives=3000",
                        "reward_model.prm_same_edits=true"],
    "lik+hn3000-lr1e-4": ['reward_model.prm_head="likelihood"', "reward_model.prm_hard_negatives=3000",
                          "reward_model.rm_lr=1e-4"],
    "hn3000+layers1": ["reward_model.prm_hard_negatives=3000", "reward_model.prm_extra_layers=1"],
    "hn3000+layers2": ["reward_model.prm_hard_negatives=3000", "reward_model.prm_extra_layers=2"],
}
KEEP = ("00_setup", "01_evolve", "02_dedup", "03_sft", "arith", "tiny-llama", "config.resolved.toml", "manifest.json")


def _copy(src: Path, dst: Path) -> None:
    """The source run's 00-03, its IRM and its PRM samples; nothing of its PRM, 05, 06 or 07."""
    if dst.exists():
        shutil.rmtree(dst)
    dst.mkdir(parents=True)
    for name in KEEP:
        if (src / name).is_dir():
            shutil.copytree(src / name, dst / name, symlinks=True)
        elif (src / name).exists():
            shutil.copy2(src / name, dst / name)
    rm_src, rm_dst = src / "04_reward_models", dst / "04_reward_models"
    rm_dst.mkdir()
    for name in ("irm", "irm_fanout.jsonl", "irm_pairs.jsonl", "prm_samples.jsonl"):
        if (rm_src / name).is_dir():
            shutil.copytree(rm_src / name, rm_dst / name)
        elif (rm_src / name).exists():
            shutil.copy2(rm_src / name, rm_dst / name)


def _fifth(log: list[dict], key: str, last: bool) -> float | None:
    part = log[-max(1, len(log) // 5):] if last else log[:max(1, len(log) // 5)]
    values = [r[key] for r in part if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def measure(lever: str, source: Path, ppo: bool, extra: list[str]) -> dict:
    from rleif_kit.checks.probe_sets import probe_solutions
    from rleif_kit.checks.probes import prm_probes
    from rleif_kit.core.config import load_config
    from rleif_kit.core.jsonl import read_jsonl
    from rleif_kit.core.metrics import roc_auc
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.core.run_setup import apply_threads_and_seed
    from rleif_kit.rewards.rm_datasets import split_by_question
    from rleif_kit.rewards.reward import prm_scorer
    from rleif_kit.rewards.prm import train_prm
    from rleif_kit.rewards.stage import build_prm_examples
    from rleif_kit.worlds import world_for

    root = ROOT / "reports" / "prm_levers" / lever
    run = root / "run"
    _copy(source / "run", run)
    overrides = [*tiny_overrides(run), *LEVERS.get(lever, []), *extra]
    cfg = load_config(PRESET, overrides, workdir=ROOT)
    apply_threads_and_seed(cfg)
    paths = RunPaths(cfg.output_dir)
    world = world_for(cfg)
    rm = cfg.reward_model

    start = time.perf_counter()
    data = build_prm_examples(cfg, paths, None, progress=False)
    model, tok, result = train_prm(cfg, paths, data.examples + data.extra)
    seconds = {**{k: round(v, 1) for k, v in data.seconds.items()}, "training": round(result.runtime_s, 1),
               "prm_total": round(time.perf_counter() - start, 1)}
    score = prm_scorer(model, tok, rm.prm_aggregate, max_len=rm.rm_max_len, world=world)
    probes = {}
    for v in prm_probes(score, probe_solutions(cfg, paths), cfg.diagnostics, "held-out problems", cfg.base.seed,
                        edits=world.solution_edits):
        n = v.numbers
        probes[v.check.removeprefix("prm_probe_")] = {"status": v.status, "moved_right": round(n["moved_right"], 3),
                                                      "mean_change": round(n["mean_change"], 3),
                                                      "ci95": [round(x, 3) for x in n["ci95"]]}
    heldout = split_by_question(data.examples, rm.rm_heldout_share, cfg.base.seed)[1]
    ra = score([{"text": e["question"]} for e in heldout], [e["solution"] for e in heldout])
    truth = [all(e["labels"]) for e, a in zip(heldout, ra) if a is not None]
    row = {"lever": lever, "overrides": LEVERS.get(lever, []) + extra, "examples": len(data.examples),
           "hard_negatives": len(data.extra), "by_source": data.by_source, "step_auc": result.step_auc,
           "step_accuracy": result.step_accuracy, "heldout_steps": result.heldout_steps,
           "solution_auc": roc_auc(truth, [a for a in ra if a is not None]), "heldout_solutions": len(truth),
           "probes": probes, "probes_ok": all(p["status"] == "ok" for p in probes.values()), "seconds": seconds}
    if ppo:
        from rleif_kit.pipeline.runner import run_pipeline

        ppo_overrides = [*overrides, 'reward_model.answer_reward="prm"', "ppo.force=true"]
        start = time.perf_counter()
        run_pipeline(str(PRESET), "05_ppo,06_eval", ppo_overrides, report_dir=str(root / "reports"))
        log = list(read_jsonl(paths.ppo_log))
        ab = json.loads(paths.eval_summary.read_text())["ab"]
        verdict = next(iter(ab.values()))
        gate = json.loads(paths.ppo_gate.read_text())
        row.update({"gain": verdict["numbers"]["gain"], "ci95": verdict["numbers"]["ci95"], "ab": verdict["status"],
                    "sft": verdict["numbers"]["sft_accuracy"], "ppo": verdict["numbers"]["ppo_accuracy"],
                    "r_truth_auc_first": _fifth(log, "r_truth_auc", last=False),
                    "r_truth_auc_last": _fifth(log, "r_truth_auc", last=True),
                    "gate_fails": [v["check"] for v in gate if v["status"] == "fail"],
                    "ppo_seconds": round(time.perf_counter() - start, 1)})
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levers", nargs="+", default=list(LEVERS))
    parser.add_argument("--set", dest="extra", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="an override added to every lever (its name gets the overrides)")
    parser.add_argument("--ppo", action="store_true", help="also PPO on rI x rA from each PRM, and the A/B")
    parser.add_argument("--source", default=str(ROOT / "reports" / "spread" / "tiny-cpu" / "pinned-s42"))
    parser.add_argument("--out", default=str(ROOT / "reports" / "bench" / "prm_levers.json"))
    args = parser.parse_args(argv)
    numerics.pin("pinned")  # as the preset's setup() does, before torch loads
    out = Path(args.out)
    rows = json.loads(out.read_text())["rows"] if out.exists() else []
    for lever in args.levers:
        row = measure(lever, Path(args.source), args.ppo, args.extra)
        rows = [r for r in rows if r["overrides"] != row["overrides"] or ("gain" in r and "gain" not in row)] + [row]
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"rows": rows, "source": args.source}, indent=1) + "\n")
        print(json.dumps(row), flush=True)
    names = sorted({k for r in rows for k in r["probes"]})
    print(f"\n{'lever':<28} {'step AUC':>8} {'sol AUC':>7} " + " ".join(f"{n[:12]:>12}" for n in names)
          + f" {'gain':>6} {'AUC first/last':>14} {'PRM s':>6}")
    for r in rows:
        cells = " ".join(f"{r['probes'][n]['moved_right']:>9.0%} {r['probes'][n]['status'][0]:>2}" if n in r["probes"]
                         else f"{'':>12}" for n in names)
        gain = f"{100 * r['gain']:+.1f}" if "gain" in r else ""
        aucs = f"{r['r_truth_auc_first']:.2f}/{r['r_truth_auc_last']:.2f}" if "gain" in r else ""
        print(f"{r['lever'] + ''.join(' ' + o for o in r['overrides'][len(LEVERS.get(r['lever'], [])):]):<28.28} "
              f"{r['step_auc'] or 0:>8.3f} {r['solution_auc'] or 0:>7.3f} {cells} {gain:>6} {aucs:>14} "
              f"{r['seconds']['prm_total']:>6.0f}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
