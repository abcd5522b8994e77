"""Stage 04 in one call, ``run_rewards(cfg, paths)``: IRM data → IRM → PRM data → PRM → scored samples and
their checks; the notebook and ``python -m rleif_kit.rewards`` both call it, then show what it returns.

    python -m rleif_kit.rewards --params params/tiny-cpu.toml
    accelerate launch --config_file params/accelerate/ddp.yaml -m rleif_kit.rewards --params params/wizardmath-7b.toml

Each step reads and writes files under ``04_reward_models/`` and resumes from them: the fan-out and
the judges' answers are append-only JSONL (``evolve.fanout.run_fanout``, ``judge_labels``), the sampled
solutions are written per batch (``prm.sample_solutions``).

Who judges: with the world's own evolver (``[evol_instruct].backend = "world"``, arith) the IRM rankings come
from the world's programmatic judge (``World.sibling_quality``); otherwise from
``settings.models.irm_judge``. PRM step labels follow ``[reward_model].prm_step_label``: the world's step
verifier (``World.step_labels``, arith) or ``settings.models.prm_judge``; ``prm_data`` adds PRM800K-style labels.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass, field
from typing import Any

from rleif_kit.checks import stage_failures
from rleif_kit.checks.stage_failures import Failures
from rleif_kit.checks.verdicts import check_low_ra_share, check_score_distribution, format_verdicts
from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.exits import StageIncomplete
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_loss_curve, plot_score_histograms, plot_split_histogram, save_figure
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.core.verdict import Verdict
from rleif_kit.evolve.fanout import run_fanout
from rleif_kit.rewards import prm
from rleif_kit.rewards.examples import labelled_steps, prm_step_table, ranked_siblings, reward_example
from rleif_kit.rewards.hard_negatives import hard_negative_examples
from rleif_kit.rewards.irm import IRMResult, train_irm
from rleif_kit.rewards.irm_data import programmatic_judge, quality_pairs
from rleif_kit.rewards.judge_labels import judge_irm_rankings, judge_prm_labels, report_path
from rleif_kit.rewards.prm import PRMResult, fmt_score, train_prm
from rleif_kit.rewards.reward import answer_scores, irm_score, solution_step_ends
from rleif_kit.rewards.rm_datasets import split_by_question
from rleif_kit.worlds import world_for
from rleif_kit.worlds.data import instruction_pool
from rleif_kit.worlds.intros import stage_intro

# The stage's public face: what its notebook and ``python -m rleif_kit.rewards`` use. The views are defined in
# rewards/examples.py, fmt_score in rewards/prm.py, the plots in core/plots.py and the verdicts' text in
# checks/verdicts.py; they are offered here so that the notebook reads one stage module.
__all__ = ["stage_intro", "run_rewards", "RewardModels", "IRMData", "PRMData", "ScoreSample", "build_irm_pairs",
           "build_prm_examples", "score_sample", "ranked_siblings", "labelled_steps", "prm_step_table", "fmt_score",
           "plot_loss_curve", "plot_score_histograms", "plot_split_histogram", "save_figure", "format_verdicts",
           "reward_example"]

SCORE_SAMPLE = 100  # instructions and solutions scored for the distribution checks (reward-health check 1)


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

    def summary(self) -> str:
        return (f"{self.groups} sibling sets, {self.variants} variants, judge {self.judge}: "
                f"{len(self.pairs)} balanced pairs ({self.failed} rankings failed)")


def build_irm_pairs(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> IRMData:
    """Fan out ``irm_groups`` instructions into ``irm_samples_per_instruction`` siblings; rank; make pairs."""
    rm = cfg.reward_model
    parents = _sample(instruction_pool(cfg, paths), rm.irm_groups, cfg.base.seed)
    failed: dict[str, str] = {}
    fanout = run_fanout(cfg, paths.irm_fanout, parents, k=rm.irm_samples_per_instruction,
                        settings=settings, progress=progress, failed=failed)
    stop_on_fanout_failures(cfg, paths, len(fanout) + len(failed), failed)
    groups: dict[str, list[dict]] = {}
    for r in fanout:
        groups.setdefault(r["sibling_group"], []).append(r)
    world = world_for(cfg)
    if programmatic_judge(cfg, world):
        pairs = quality_pairs(fanout, lambda r: world.sibling_quality(cfg, r), seed=cfg.base.seed)
        return IRMData(pairs, len(groups), len(fanout), world.name)

    out = paths.irm_rankings
    pairs = judge_irm_rankings(cfg, settings, [sorted(g, key=lambda r: r["id"]) for g in groups.values()], out,
                               progress=progress)
    failed = sum(1 for r in read_jsonl(out) if r.get("status") == "failed")
    report = report_path(out)
    judge = json.loads(report.read_text()).get("model", "judge") if report.exists() else "judge"
    return IRMData(pairs, len(groups), len(fanout), judge, failed)


def stop_on_fanout_failures(cfg: RunConfig, paths: RunPaths, total: int, failed: dict[str, str]) -> None:
    """The fan-out's failed siblings into ``04_reward_models/failures.json``; past ``[diagnostics]
    judge_failure_fail`` (or all failed) 04 stops before it ranks what is left (exit 4: a rerun asks them again)."""
    record = stage_failures.write(paths.stage_dir(REWARD_MODELS), Failures("fan-out evolutions", total, failed),
                                  cfg.diagnostics.judge_failure_fail)
    message = stage_failures.stop_message(record, "fan-out evolutions",
                                          "fix the cause, then rerun: the failed siblings are asked again")
    if message:
        raise StageIncomplete(f"fan-out: {message}")


@dataclass
class PRMData:
    examples: list[dict]
    samples: int
    flagged: int  # sampled solutions without findable steps (or not labelled)
    labeller: str
    by_source: dict[str, int] = field(default_factory=dict)
    extra: list[dict] = field(default_factory=list)  # train-only examples (hard negatives): train_prm(examples + extra)
    seconds: dict[str, float] = field(default_factory=dict)  # what each label source cost

    def summary(self) -> str:
        n_steps, correct_share = labelled_steps(self.examples)
        seconds = ", ".join(f"{k} {v:.0f}" for k, v in self.seconds.items())
        return (f"{self.samples} sampled solutions, {self.flagged} flagged (no steps), {len(self.examples)} labelled "
                f"by {self.labeller} {self.by_source}; {correct_share:.0%} of {n_steps} steps correct; "
                f"{len(self.extra)} hard negatives for training only; seconds by label source: {seconds}")


def build_prm_examples(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> PRMData:
    """SFT-model samples on evolved instructions, labelled per step; plus ``prm_data`` when given; plus, as
    train-only ``extra``, ``prm_hard_negatives`` right solutions with one error put in (``hard_negatives.py``)."""
    rm = cfg.reward_model
    world = world_for(cfg)
    seconds = {}
    start = time.perf_counter()
    samples = prm.sample_solutions(cfg, paths, instruction_pool(cfg, paths), rm.prm_samples,
                                   paths.prm_samples, progress) if rm.prm_samples else []
    seconds["sampling"] = time.perf_counter() - start
    start = time.perf_counter()
    if rm.prm_step_label == "verifier":
        examples, flagged = prm.verifier_examples(samples, world)
        labeller = "verifier"
    else:
        items = []
        for s in samples:
            text = s["solution"]
            ends = solution_step_ends(text, world)
            starts = [0] + ends[:-1]
            items.append({**s, "steps": [text[a:b].strip() for a, b in zip(starts, ends)]})
        judged = judge_prm_labels(cfg, settings, items, paths.prm_judged, progress=progress)
        parents = {str(s["id"]): s.get("instruction_id") for s in samples}
        examples = [{**j, "instruction_id": parents.get(str(j["id"])), "source": "judged"} for j in judged]
        flagged, labeller = len(samples) - len(judged), "judge"
    seconds[labeller] = time.perf_counter() - start
    if rm.prm_data:
        examples += prm.load_prm800k_style(cfg.resolve(rm.prm_data))
    extra = []
    if rm.prm_hard_negatives:
        start = time.perf_counter()
        extra = [{**e, "train_only": True} for e in
                 hard_negative_examples(instruction_pool(cfg, paths), world, rm.prm_hard_negatives, cfg.base.seed)]
        seconds["hard_negatives"] = time.perf_counter() - start
    by_source: dict[str, int] = {}
    for e in examples + extra:
        source = e["source"].split(":")[0]
        by_source[source] = by_source.get(source, 0) + 1
    return PRMData(examples, len(samples), flagged, labeller, by_source, extra, seconds)


@dataclass
class ScoreSample:
    """Scores on held-out samples, for the histograms and reward-health checks 1 and 2."""
    irm_scores: list[float]
    answer_scores: list[float]  # rA of held-out solutions
    answer_correct: list[bool]  # whether each of those solutions is fully correct (by its labels)
    flagged: int
    verdicts: list[Verdict]

    @property
    def irm_mean(self) -> float:
        return sum(self.irm_scores) / len(self.irm_scores)

    @property
    def ra_mean(self) -> float:
        """0.0 when every held-out solution was flagged."""
        return sum(self.answer_scores) / max(1, len(self.answer_scores))


def score_sample(cfg: RunConfig, paths: RunPaths, irm: tuple[Any, Any], prm_model: tuple[Any, Any],
                 prm_examples: list[dict]) -> ScoreSample:
    """IRM on held-out evolved instructions, PRM rA on held-out solutions; distribution and rA checks."""
    rm, dcfg = cfg.reward_model, cfg.diagnostics
    fanned = {r["sibling_group"] for r in read_jsonl(paths.irm_fanout)}
    pool = instruction_pool(cfg, paths)
    instructions = [r for r in pool if r["id"] not in fanned] or pool
    texts = [r["text"] for r in _sample(instructions, SCORE_SAMPLE, cfg.base.seed + 1)]
    irm_scores = irm_score(irm[0], irm[1], texts, max_length=rm.rm_max_len)
    heldout = _sample(split_by_question(prm_examples, rm.rm_heldout_share, cfg.base.seed)[1], SCORE_SAMPLE,
                      cfg.base.seed + 2)
    ra = answer_scores(prm_model[0], prm_model[1], [(e["question"], e["solution"]) for e in heldout],
                       rm.prm_aggregate, max_len=rm.rm_max_len, world=world_for(cfg))
    kept = [(a, all(e["labels"])) for a, e in zip(ra, heldout) if a is not None]
    answer, correct = [a for a, _ in kept], [c for _, c in kept]
    irm_dir, prm_dir = paths.rel(paths.irm_model), paths.rel(paths.prm_model)
    verdicts = [check_score_distribution("IRM", irm_scores, dcfg, f"{irm_dir} on {len(texts)} instructions"),
                check_score_distribution("PRM", answer, dcfg, f"{prm_dir} rA on {len(answer)} solutions"),
                check_low_ra_share(answer, dcfg, f"{prm_dir} rA on {len(answer)} held-out solutions")]
    return ScoreSample(irm_scores, answer, correct, len(ra) - len(answer), verdicts)


# ------------------------------------------------------------------ the stage in one call

@dataclass
class RewardModels:
    """What ``run_rewards`` made: each model's data, its result and the trained model itself (the PRM's step table
    reads it), and the scored sample with its verdicts. On a rank other than 0 of ``accelerate launch`` the data
    and the sample are None: rank 0 builds the data and scores, every rank trains."""
    irm_data: IRMData | None
    irm: IRMResult
    irm_model: Any
    irm_tokenizer: Any
    prm_data: PRMData | None
    prm: PRMResult
    prm_model: Any
    prm_tokenizer: Any
    sample: ScoreSample | None

    @property
    def runtime_s(self) -> float:
        """Training time of both models (data building and scoring not counted)."""
        return self.irm.runtime_s + self.prm.runtime_s

    def irm_summary(self) -> str:
        return (f"IRM: {self.irm.train_pairs} pairs, held-out pairwise accuracy {self.irm.heldout_accuracy:.3f} "
                f"on {self.irm.heldout_pairs} pairs ({self.irm.runtime_s:.0f}s)")

    def prm_summary(self) -> str:
        return (f"PRM: {self.prm.train_steps} labelled steps; held-out step accuracy "
                f"{fmt_score(self.prm.step_accuracy)}, AUC {fmt_score(self.prm.step_auc)} on "
                f"{self.prm.heldout_steps} steps ({self.prm.runtime_s:.0f}s)")

    def summary(self) -> str:
        """What ``python -m rleif_kit.rewards`` prints: each model's held-out figures, then the checks."""
        irm = f"IRM: held-out pairwise accuracy {self.irm.heldout_accuracy:.3f} on {self.irm.heldout_pairs} pairs"
        prm = (f"PRM: held-out step accuracy {fmt_score(self.prm.step_accuracy)}, AUC {fmt_score(self.prm.step_auc)} "
               f"on {self.prm.heldout_steps} steps")
        return "\n".join([irm, prm, *([format_verdicts(self.sample.verdicts)] if self.sample is not None else [])])


def training_rows(paths: RunPaths, which: str, rows: list[dict] | None) -> list[dict]:
    """The rows ``which`` (``irm`` / ``prm``) trains on, the same on every rank. In one process they are ``rows`` as
    rank 0 built them (``train_irm`` / ``train_prm`` write them with each row's split); under ``accelerate launch``
    rank 0 writes them to ``paths.rm_rows(which)`` and every rank, rank 0 too, reads that file back, so all train on
    identical inputs."""
    if dist.world_size() == 1:
        return rows
    if dist.is_main():
        write_jsonl(paths.rm_rows(which), rows)
    dist.barrier()
    return list(read_jsonl(paths.rm_rows(which)))


def run_rewards(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> RewardModels:
    """Stage 04: the IRM's preference pairs and the IRM, the PRM's labelled steps and the PRM, then both models on
    held-out samples (histograms, reward-health checks 1 and 2). Each step resumes from its files."""
    main = dist.is_main()  # the data (fan-out, judges, sampling) once, on rank 0; every rank trains
    irm_data = build_irm_pairs(cfg, paths, settings, progress) if main else None
    irm_rows = training_rows(paths, "irm", irm_data.pairs if main else None)
    irm_model, irm_tok, irm = train_irm(cfg, paths, irm_rows)
    prm_data = build_prm_examples(cfg, paths, settings, progress) if main else None
    # the sampled solutions and the train-only extras (prm_hard_negatives) train; the checks read the sampled ones
    prm_rows = training_rows(paths, "prm", prm_data.examples + prm_data.extra if main else None)
    prm_model, prm_tok, prm_result = train_prm(cfg, paths, prm_rows)
    sample = score_sample(cfg, paths, (irm_model, irm_tok), (prm_model, prm_tok), prm_data.examples) if main else None
    return RewardModels(irm_data, irm, irm_model, irm_tok, prm_data, prm_result, prm_model, prm_tok, sample)
