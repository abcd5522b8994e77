"""Stage 04 as steps the notebook calls in order: IRM data → IRM → PRM data → PRM → score samples.

Each step reads and writes files under ``04_reward_models/`` and resumes from them: the fan-out and
the judges' answers are append-only JSONL (``evolve.run_fanout``, ``judge_labels``), the sampled
solutions are written per batch (``prm.sample_solutions``).

Who judges: with the arithmetic evolver (``[evol_instruct].backend = "arith"``) the IRM rankings come
from the world's programmatic judge (``irm_data.arith_quality``); otherwise from
``settings.models.irm_judge``. PRM step labels follow ``[reward_model].prm_step_label``: the step
verifier (arithmetic world) or ``settings.models.prm_judge``; ``prm_data`` adds PRM800K-style labels.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from rleif_kit import distributed as dist
from rleif_kit.config import RunConfig
from rleif_kit.diagnostics import Verdict, check_low_ra_share, check_score_distribution
from rleif_kit.jsonl import read_jsonl
from rleif_kit.paths import RunPaths

STAGE = "04_reward_models"
SCORE_SAMPLE = 100  # instructions and solutions scored for the distribution checks (reward-health check 1)
TRAINING_ROWS = {"irm": "irm_pairs.jsonl", "prm": "prm_steps.jsonl"}  # what each reward model trains on


def instruction_pool(cfg: RunConfig, paths: RunPaths) -> list[dict]:
    """The evolved, deduplicated instructions (02_dedup), else the evolved ones, else the seeds."""
    from rleif_kit.evolve import load_seeds

    for path in (paths.stage("02_dedup") / "instructions.jsonl", paths.stage("01_evolve") / "evolved.jsonl"):
        if path.exists():
            return list(read_jsonl(path))
    return list(load_seeds(cfg, paths))


def _sample(rows: list[dict], n: int, seed: int) -> list[dict]:
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows[:n]


@dataclass
class IRMData:
    pairs: list[dict]
    groups: int
    variants: int
    judge: str  # "arith" (programmatic) or the judge model's name
    failed: int = 0


def build_irm_pairs(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> IRMData:
    """Fan out ``irm_groups`` instructions into ``irm_samples_per_instruction`` siblings; rank; make pairs."""
    from rleif_kit.evolve import run_fanout

    rm, stage = cfg.reward_model, paths.stage(STAGE)
    parents = _sample(instruction_pool(cfg, paths), rm.irm_groups, cfg.base.seed)
    fanout = run_fanout(cfg, stage / "irm_fanout.jsonl", parents, k=rm.irm_samples_per_instruction,
                        settings=settings, progress=progress)
    groups: dict[str, list[dict]] = {}
    for r in fanout:
        groups.setdefault(r["sibling_group"], []).append(r)
    if cfg.evol_instruct.backend == "arith":
        from rleif_kit.irm_data import arith_irm_pairs

        pairs = arith_irm_pairs(fanout, cfg.arith.min_steps, cfg.arith.max_steps, seed=cfg.base.seed)
        return IRMData(pairs, len(groups), len(fanout), "arith")
    from rleif_kit.judge_labels import judge_irm_rankings, report_path

    out = stage / "irm_rankings.jsonl"
    pairs = judge_irm_rankings(cfg, settings, [sorted(g, key=lambda r: r["id"]) for g in groups.values()], out,
                               progress=progress)
    failed = sum(1 for r in read_jsonl(out) if r.get("status") == "failed")
    report = report_path(out)
    judge = json.loads(report.read_text()).get("model", "judge") if report.exists() else "judge"
    return IRMData(pairs, len(groups), len(fanout), judge, failed)


@dataclass
class PRMData:
    examples: list[dict]
    samples: int
    flagged: int  # sampled solutions without findable steps (or not labelled)
    labeller: str
    by_source: dict[str, int] = field(default_factory=dict)


def build_prm_examples(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> PRMData:
    """SFT-model samples on evolved instructions, labelled per step; plus ``prm_data`` when given."""
    from rleif_kit import prm

    rm, stage = cfg.reward_model, paths.stage(STAGE)
    samples = prm.sample_solutions(cfg, paths, instruction_pool(cfg, paths), rm.prm_samples,
                                   stage / "prm_samples.jsonl", progress) if rm.prm_samples else []
    if rm.prm_step_label == "verifier":
        examples, flagged = prm.verifier_examples(samples)
        labeller = "verifier"
    else:
        from rleif_kit.judge_labels import judge_prm_labels

        items = []
        for s in samples:
            text = s["solution"]
            ends = prm.solution_step_ends(text)
            starts = [0] + ends[:-1]
            items.append({**s, "steps": [text[a:b].strip() for a, b in zip(starts, ends)]})
        judged = judge_prm_labels(cfg, settings, items, stage / "prm_judged.jsonl", progress=progress)
        examples = [{**j, "source": "judged"} for j in judged]
        flagged, labeller = len(samples) - len(judged), "judge"
    if rm.prm_data:
        examples += prm.load_prm800k_style(cfg.resolve(rm.prm_data))
    by_source: dict[str, int] = {}
    for e in examples:
        by_source[e["source"]] = by_source.get(e["source"], 0) + 1
    return PRMData(examples, len(samples), flagged, labeller, by_source)


@dataclass
class ScoreSample:
    """Scores on held-out samples, for the histograms and reward-health checks 1 and 2."""
    irm_scores: list[float]
    answer_scores: list[float]  # rA of held-out solutions
    answer_correct: list[bool]  # whether each of those solutions is fully correct (by its labels)
    flagged: int
    verdicts: list[Verdict]


def score_sample(cfg: RunConfig, paths: RunPaths, irm: tuple[Any, Any], prm_model: tuple[Any, Any],
                 prm_examples: list[dict]) -> ScoreSample:
    """IRM on held-out evolved instructions, PRM rA on held-out solutions; distribution and rA checks."""
    from rleif_kit.prm import answer_scores, split_by_question
    from rleif_kit.reward_models import irm_score

    rm, dcfg = cfg.reward_model, cfg.diagnostics
    fanned = {r["sibling_group"] for r in read_jsonl(paths.stage(STAGE) / "irm_fanout.jsonl")}
    pool = instruction_pool(cfg, paths)
    instructions = [r for r in pool if r["id"] not in fanned] or pool
    texts = [r["text"] for r in _sample(instructions, SCORE_SAMPLE, cfg.base.seed + 1)]
    irm_scores = irm_score(irm[0], irm[1], texts, max_length=rm.rm_max_len)
    heldout = _sample(split_by_question(prm_examples, rm.rm_heldout_share, cfg.base.seed)[1], SCORE_SAMPLE,
                      cfg.base.seed + 2)
    ra = answer_scores(prm_model[0], prm_model[1], [(e["question"], e["solution"]) for e in heldout],
                       rm.prm_aggregate, max_len=rm.rm_max_len)
    kept = [(a, all(e["labels"])) for a, e in zip(ra, heldout) if a is not None]
    answer, correct = [a for a, _ in kept], [c for _, c in kept]
    verdicts = [check_score_distribution("IRM", irm_scores, dcfg, f"{STAGE}/irm on {len(texts)} instructions"),
                check_score_distribution("PRM", answer, dcfg, f"{STAGE}/prm rA on {len(answer)} solutions"),
                check_low_ra_share(answer, dcfg, f"{STAGE}/prm rA on {len(answer)} held-out solutions")]
    return ScoreSample(irm_scores, answer, correct, len(ra) - len(answer), verdicts)


def launch_training(cfg: RunConfig, paths: RunPaths, which: str, rows: list[dict],
                    heldout_share: float | None = None) -> bool:
    """``[base].launcher = "accelerate"``: write the training rows to ``04_reward_models/`` and train ``which``
    under ``accelerate launch`` (``--only``); False when the caller should train in-process."""
    from rleif_kit.jsonl import write_jsonl
    from rleif_kit.launch import maybe_launch, should_launch

    if not should_launch(cfg):
        return False
    write_jsonl(paths.stage(STAGE) / TRAINING_ROWS[which], rows)
    extra = [] if heldout_share is None else [f"reward_model.rm_heldout_share={heldout_share}"]
    return maybe_launch(cfg, "rleif_kit.reward_stage", overrides=[*cfg.overrides, *extra], args=["--only", which])


def main(argv: list[str] | None = None) -> None:
    """``python -m rleif_kit.reward_stage --params FILE``: stage 04 without a notebook (``accelerate launch -m``
    too: rank 0 builds the data and scores, every rank trains)."""
    import argparse

    from rleif_kit.diagnostics import format_verdicts
    from rleif_kit.jsonl import write_jsonl
    from rleif_kit.launch import save_result
    from rleif_kit.prm import train_prm
    from rleif_kit.reward_models import train_irm
    from rleif_kit.settings import load_settings
    from rleif_kit.setup import setup

    parser = argparse.ArgumentParser(description="Train the IRM and the PRM without a notebook.")
    parser.add_argument("--params", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--settings", default=None)
    parser.add_argument("--only", choices=sorted(TRAINING_ROWS),
                        help="train only this model, on the rows already in 04_reward_models/ (what a notebook "
                             "with [base] launcher = \"accelerate\" runs)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=STAGE)
    settings = load_settings(args.settings) if args.settings else None
    stage, trained = paths.stage(STAGE), {}
    for which, build, train in (("irm", build_irm_pairs, train_irm), ("prm", build_prm_examples, train_prm)):
        if args.only not in (None, which):
            continue
        if args.only is None and dist.is_main():  # the data (judges, sampling, files) once, on rank 0
            data = build(cfg, paths, settings)
            write_jsonl(stage / TRAINING_ROWS[which], data.pairs if which == "irm" else data.examples)
        dist.barrier()
        rows = list(read_jsonl(stage / TRAINING_ROWS[which]))  # every rank, rank 0 too: identical inputs
        model, tok, result = train(cfg, paths, rows)
        trained[which] = (model, tok, rows)
        if dist.is_main():
            save_result(result, stage / which / "result.json")
            print(f"IRM: held-out pairwise accuracy {result.heldout_accuracy:.3f} on {result.heldout_pairs} pairs"
                  if which == "irm" else
                  f"PRM: held-out step accuracy {result.step_accuracy}, AUC {result.step_auc} on "
                  f"{result.heldout_steps} steps")
    if args.only is None and dist.is_main():
        (irm_model, irm_tok, _), (prm_model, prm_tok, examples) = trained["irm"], trained["prm"]
        print(format_verdicts(score_sample(cfg, paths, (irm_model, irm_tok), (prm_model, prm_tok), examples).verdicts))


if __name__ == "__main__":
    main()
