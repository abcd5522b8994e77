"""Stage 07's reading layer: every reward-health check whose artifacts exist, from the run directory.

The checks themselves are pure functions in ``checks/verdicts.py``; this module finds their inputs:

| check | reads |
|---|---|
| `evolve_failures` | `01_evolve/failed.jsonl` (with `evolved.jsonl`, `eliminated.jsonl`) |
| `duplicate_rate`, `kept_floor` | `02_dedup/dedup_report.json` |
| `step_format`, `prompt_consistency` | `03_sft/train.jsonl` (else `02_dedup/sft.jsonl`), `06_eval/*/*.meta.json` |
| `irm_distribution`, `prm_distribution` (check 1) | `04_reward_models/{irm,prm}/`, `prm_samples.jsonl`; `02_dedup/instructions.jsonl` |
| `{irm,prm,verifier}_probe_<edit>` (probes) | the reward models (or the step verifier) on `arith/heldout.jsonl`'s gold solutions and questions, edited |
| `low_ra_share` (check 2) | `05_ppo/log.jsonl` (first `low_ra_steps` steps), else the PRM's rA of check 1 |
| `reward_truth` | `05_ppo/log.jsonl`'s per-step AUC of r over right vs wrong samples, else check 1's held-out PRM samples |
| `kl_blowup` | `05_ppo/log.jsonl` (first `kl_steps` steps) |
| `sft_vs_ppo_<benchmark>` (check 3) | `06_eval/{sft,ppo}/<benchmark>.jsonl`, else `05_ppo/eval_{sft,ppo}.jsonl` |

A check whose artifacts are missing is skipped with a note, so this runs at any point of a run.

    python -m rleif_kit.diagnostics --params params/tiny-cpu.toml [--no-score]
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from html import escape
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.checks import verdicts as dg
from rleif_kit.checks.probe_sets import NO_PROBE_SET, instruction_probe_pairs, probe_solutions
from rleif_kit.checks.probes import check_reward_truth, check_reward_truth_log, irm_probes, prm_probes
from rleif_kit.checks.verdict_table import verdict_table
from rleif_kit.checks.verdicts import ab_verdict
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import (
    plot_counts,
    plot_gain,
    plot_probes,
    plot_reward_health_curves,
    plot_score_histograms,
    save_figure,
)
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.core.stages import DEDUP, EVAL, EVOLVE, PPO, REWARD_MODELS, SFT
from rleif_kit.core.tables import Note, text_table
from rleif_kit.core.verdict import STATUS_COLORS, STATUSES, Verdict, fmt_number
from rleif_kit.rewards.reward import (
    RM_INFO,
    AnswerScorer,
    InstructionScorer,
    irm_scorer,
    load_rm,
    prm_scorer,
    step_verifier_scorer,
    verifiable_terms,
    verifier_scorer,
)
from rleif_kit.rewards.rm_datasets import split_by_question
from rleif_kit.worlds import world_for
from rleif_kit.worlds.benchmarks import benchmark as get_benchmark
from rleif_kit.worlds.benchmarks import benchmark_names
from rleif_kit.worlds.intros import stage_intro
from rleif_kit.worlds.words import run_words

# The stage's public face: what its notebook and ``python -m rleif_kit.diagnostics`` use (``rleif doctor`` runs
# check_artifacts). The verdict table (checks/verdict_table.py) and the plots (core/plots.py) are defined there and
# offered here, so that the notebook reads one stage module.
__all__ = ["stage_intro", "Health", "run_diagnostics", "check_artifacts", "verdict_table", "probe_example",
           "plot_probes", "plot_score_histograms", "plot_reward_health_curves", "plot_gain", "run_words", "plot_counts",
           "save_figure"]


@dataclass
class Health:
    """The verdicts, the checks skipped (and why), and what the notebook plots. ``rleif doctor`` reports in the
    same form (its own checks first, then these)."""

    verdicts: list[Verdict] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    scores: dict[str, list[float]] = field(default_factory=dict)  # histogram title -> scores in [0, 1]
    banded: list[str] = field(default_factory=list)  # the titles check 1 holds to the healthy mean band (IRM, PRM)
    example: dict[str, Any] | None = None  # one probe edit and how the run's answer term moved (probe_example)
    ppo_log: list[dict] = field(default_factory=list)
    accuracy: dict[str, float] = field(default_factory=dict)  # "SFT" / "PPO" (per benchmark when several)
    per_operator: dict[str, dict[str, int]] = field(default_factory=dict)  # dedup: operator -> in/kept/removed

    def statuses(self) -> dict[str, str]:
        return {v.check: v.status for v in self.verdicts}

    def number(self, check: str, key: str) -> Any:
        """One measured number of one check; None when the check did not run."""
        return next((v.numbers.get(key) for v in self.verdicts if v.check == check), None)

    def probes(self) -> dict[str, dict[str, Any]]:
        """The counterfactual probes: ``{check: {moved_right, mean_change, pairs, status}}``."""
        return {v.check: {"moved_right": v.numbers["moved_right"], "mean_change": v.numbers["mean_change"],
                          "pairs": v.numbers["pairs"], "status": v.status}
                for v in self.verdicts if "_probe_" in v.check}

    def ab(self) -> dict[str, dict[str, Any]]:
        """Check 3 per benchmark: ``{check: {gain, ci95, n}}``."""
        return {v.check: {k: v.numbers[k] for k in ("gain", "ci95", "n")} for v in self.verdicts
                if v.check.startswith("sft_vs_ppo")}

    @property
    def fails(self) -> int:
        return sum(v.status == "fail" for v in self.verdicts)

    @property
    def ok(self) -> bool:
        return self.fails == 0

    def table(self) -> str:
        """The verdict table, the checks skipped and the counts (what ``rleif doctor`` prints)."""
        counts = {s: sum(v.status == s for v in self.verdicts) for s in STATUSES}
        lines = [dg.format_verdict_table(self.verdicts)] + [f"skipped {note}" for note in self.skipped]
        return "\n".join(lines + [", ".join(f"{n} {s}" for s, n in counts.items())])

    def summary(self) -> str:
        """"N ok, N warn, N fail" and one line per check skipped."""
        counts = ", ".join(f"{sum(v.status == s for v in self.verdicts)} {s}" for s in STATUSES)
        return "\n".join([counts] + [f"skipped {note}" for note in self.skipped])


# ------------------------------------------------------------------------------ 01, 02: data

def check_evolve(cfg: RunConfig, paths: RunPaths, health: Health) -> None:
    failed_path = paths.evolve_failed
    if not paths.evolved.exists():
        health.skipped.append(f"evolve_failures: {paths.rel(paths.evolved)} not found (run {EVOLVE})")
        return
    # an evolution given up after its attempts (eliminated as api_error) failed, as 01's failures.json counts it
    decided = {r["id"] for path in (paths.evolved, paths.eliminated) for r in read_jsonl(path)
               if r.get("reason") != "api_error"}
    last_error = {r["id"]: r.get("error") for r in read_jsonl(failed_path) if r["id"] not in decided}
    causes: dict[str, int] = {}
    for error in last_error.values():
        cause = dg.failure_cause(error)
        causes[cause] = causes.get(cause, 0) + 1
    health.verdicts.append(dg.check_evolve_failures(causes, len(decided), cfg.diagnostics,
                                                    concurrency=cfg.evol_instruct.concurrency,
                                                    source=paths.rel(failed_path)))


def check_dedup(cfg: RunConfig, paths: RunPaths, health: Health) -> None:
    path = paths.dedup_report
    if not path.exists():
        health.skipped.append(f"duplicate_rate, kept_floor: {paths.rel(path)} not found (run {DEDUP})")
        return
    report, ev = json.loads(path.read_text()), cfg.evol_instruct
    duplicates = sum(n for layer, n in report["removed_by_layer"].items() if not layer.startswith("decontam"))
    source = paths.rel(path)
    health.verdicts += [dg.check_duplicate_rate(report["total"], duplicates, cfg.diagnostics,
                                                temperature=ev.temperature, dedup_threshold=ev.dedup_threshold,
                                                up_ratio=ev.evolve_up_ratio, source=source),
                        dg.check_kept_floor(report["kept"], cfg.dedup.min_kept, ev.evolve_up_ratio, source)]
    health.per_operator = {op: c for op, c in report.get("per_operator", {}).items() if op != "seed"}


# ------------------------------------------------------------------------------ 03: SFT data and prompts

def eval_cot(cfg: RunConfig, paths: RunPaths) -> tuple[bool, str]:
    """The CoT setting evaluation used (its result files' meta), else the one it will use ([eval])."""
    for meta in sorted(paths.eval_dir.glob("*/*.meta.json")):
        data = json.loads(meta.read_text())
        if data.get("benchmark") in benchmark_names() and not get_benchmark(data["benchmark"]).runs_code:
            return bool(data["cot"]), paths.rel(meta)
    return cfg.eval.cot_prompt, "[eval] cot_prompt"


def check_sft_data(cfg: RunConfig, paths: RunPaths, health: Health) -> None:
    train, built = paths.sft_data, paths.sft_rows
    if train.exists():
        rows = list(read_jsonl(train))
        responses = [r["completion"] for r in rows if r.get("source") != "open_domain"]
        prompts = rows
    elif built.exists():
        rows = list(read_jsonl(built))
        responses, prompts = [r["response"] for r in rows if r.get("source") != "open_domain"], []
    else:
        health.skipped.append(f"step_format, prompt_consistency: no SFT data yet (run {DEDUP} or {SFT})")
        return
    source = paths.rel(train if train.exists() else built)
    health.verdicts.append(dg.check_step_format(responses, cfg.diagnostics, seed=cfg.base.seed, source=source,
                                                world=world_for(cfg)))
    asked = [b for b in cfg.eval.benchmarks if b in benchmark_names()]
    world = world_for(cfg)
    if not prompts:
        health.skipped.append(f"prompt_consistency: {paths.rel(train)} not found (run {SFT})")
    elif not any(not get_benchmark(b).own_prompt for b in asked):
        if asked and world.prompt_note:
            health.verdicts.append(dg.known_prompt_difference(world, asked, f"{source} vs [eval] benchmarks"))
        else:
            health.skipped.append("prompt_consistency: no benchmark in [eval] benchmarks is asked in the training "
                                  "prompt")
    else:
        cot, where = eval_cot(cfg, paths)
        health.verdicts.append(dg.check_prompt_consistency(prompts, cot, source=f"{source} vs {where}",
                                                             world=world_for(cfg)))


# ------------------------------------------------------------------------------ 04: checks 1 (and 2)

def _seeded_sample(rows: list, n: int, seed: int) -> list:
    rows = list(rows)
    random.Random(seed).shuffle(rows)
    return rows[:n]


def score_instructions(cfg: RunConfig, paths: RunPaths, irm: InstructionScorer) -> tuple[list[float], str]:
    """IRM rI of ``score_sample`` evolved instructions the IRM did not train on (not fanned out in 04)."""
    pool_path = paths.kept_instructions
    pool = [r for r in read_jsonl(pool_path) if r.get("round", 0) > 0] or list(read_jsonl(pool_path))
    fanned = {r["sibling_group"] for r in read_jsonl(paths.irm_fanout)}
    pool = [r for r in pool if r["id"] not in fanned] or pool
    texts = [r["text"] for r in _seeded_sample(pool, cfg.diagnostics.score_sample, cfg.base.seed + 1)]
    return irm(texts), f"{paths.rel(paths.irm_model)} on {len(texts)} instructions of {paths.rel(pool_path)}"


@dataclass
class HeldOut:
    """The PRM's scores of sampled solutions to held-out questions, and what the verifier says of them."""
    records: list[dict]
    solutions: list[str]
    ra: list[float | None]
    correct: list[bool | None]
    source: str


def score_solutions(cfg: RunConfig, paths: RunPaths, prm: AnswerScorer) -> HeldOut:
    """PRM rA of ``score_sample`` sampled solutions to held-out questions (None: flagged, no steps found)."""
    samples = list(read_jsonl(paths.prm_samples))
    heldout = split_by_question(samples, cfg.reward_model.rm_heldout_share, cfg.base.seed)[1] or samples
    picked = _seeded_sample(heldout, cfg.diagnostics.score_sample, cfg.base.seed + 2)
    records = [{"id": s["id"], "text": s["question"], "problem": s.get("problem")} for s in picked]
    solutions = [s["solution"] for s in picked]
    ra = prm(records, solutions)
    flagged = sum(a is None for a in ra)
    world = world_for(cfg)
    return HeldOut(records, solutions, ra, [v.correct for v in world.check_batch(records, solutions)],
                   f"{paths.rel(paths.prm_model)} rA on {len(ra) - flagged} solutions of {paths.prm_samples.name} "
                   f"({flagged} flagged)")


def _load_rm(cfg: RunConfig, paths: RunPaths, name: str) -> tuple[Any, Any]:
    # as PPO loads them: 4-bit beside a QLoRA policy (the 7B recipe), else full precision
    return load_rm(paths.rm_model(name), load_in_4bit=cfg.sft.finetune == "qlora")


@dataclass
class Scored:
    """What check 1 scored, for the checks after it (check 2's and reward-against-truth's fallbacks)."""
    irm: InstructionScorer | None = None
    heldout: HeldOut | None = None


def check_reward_models(cfg: RunConfig, paths: RunPaths, health: Health, score: bool = True) -> Scored:
    """Check 1 and the counterfactual probes for each reward model that exists (a PRM PPO does not use is
    probed too, its fails reported as warn), and the probes of the step verifier when it is PPO's rA."""
    rm, d, seed = cfg.reward_model, cfg.diagnostics, cfg.base.seed
    scored = Scored()
    if not score:
        health.skipped.append("irm_distribution, prm_distribution, probes: scoring switched off")
        return scored
    solutions, pairs = probe_solutions(cfg, paths), instruction_probe_pairs(cfg, paths)
    probe_src = world_for(cfg).probe_source(paths)
    if (paths.irm_model / RM_INFO).exists():
        scored.irm = irm_scorer(*_load_rm(cfg, paths, "irm"), max_length=rm.rm_max_len)
        scores, source = score_instructions(cfg, paths, scored.irm)
        health.scores["IRM rI (evolved instructions)"] = scores
        health.banded.append("IRM rI (evolved instructions)")
        health.verdicts.append(dg.check_score_distribution("IRM", scores, d, source))
        health.verdicts += irm_probes(scored.irm, pairs, d, f"{paths.rel(paths.irm_model)} on {probe_src}", seed)
    else:
        health.skipped.append(f"irm_distribution, irm probes: {paths.rel(paths.irm_model)} not found "
                              f"(run {REWARD_MODELS})")
    if (paths.prm_model / RM_INFO).exists() and paths.prm_samples.exists():
        prm = prm_scorer(*_load_rm(cfg, paths, "prm"), rm.prm_aggregate, max_len=rm.rm_max_len, world=world_for(cfg))
        scored.heldout = score_solutions(cfg, paths, prm)
        answer = [a for a in scored.heldout.ra if a is not None]
        health.scores["PRM rA (sampled solutions)"] = answer
        health.banded.append("PRM rA (sampled solutions)")
        health.verdicts.append(dg.check_score_distribution("PRM", answer, d, scored.heldout.source))
        _reward_terms(cfg, scored.heldout, health)
        reads_ra = "rA" in parse_reward_formula(cfg.ppo.reward_formula).terms
        in_use = rm.answer_reward == "prm" and reads_ra
        unused = f" (PPO's rA is the {rm.answer_reward})" if reads_ra else f" (PPO's r = {cfg.ppo.reward_formula})"
        health.verdicts += prm_probes(prm, solutions, d, f"{paths.rel(paths.prm_model)} on {probe_src}"
                                      + ("" if in_use else unused), seed, cap=None if in_use else "warn",
                                      edits=world_for(cfg).solution_edits)
        if in_use:
            health.example = one_probe(prm, "rA (the PRM)", solutions, world_for(cfg).solution_edits)
    else:
        health.skipped.append(f"prm_distribution, prm probes: {paths.rel(paths.prm_model)} or "
                              f"{paths.prm_samples.name} not found (run {REWARD_MODELS})")
    if rm.answer_reward == "verifier":
        health.verdicts += prm_probes(step_verifier_scorer(world_for(cfg)), solutions, d,
                                      f"the step verifier on {probe_src}", seed,
                                      model="verifier", edits=world_for(cfg).solution_edits)
    if not solutions:
        health.skipped.append(f"probes: {NO_PROBE_SET}")
    terms, world = parse_reward_formula(cfg.ppo.reward_formula).terms, world_for(cfg)
    if "rV" in terms:  # the run's answer term is the verifier's: the example shows it (cheap, no model)
        health.example = one_probe(verifier_scorer(world), "rV (the verifier)", solutions, world.solution_edits)
    elif rm.answer_reward == "verifier" and "rA" in terms:
        health.example = one_probe(step_verifier_scorer(world), "rA (the step verifier)", solutions,
                                   world.solution_edits)
    if health.example is not None:
        health.example["code"] = bool(world.code_language)
    return scored


def one_probe(score: AnswerScorer, term: str, solutions: Sequence[dict], edits: dict) -> dict[str, Any] | None:
    """One counterfactual probe worked through: the first right solution the first applicable edit changes, both
    scored by ``score`` (the run's answer term): ``{edit, direction, term, question, solution, edited, before,
    after}``. None without a solution or an edit that applies."""
    for name, (edit, direction) in edits.items():
        for record in solutions:
            edited = edit(record["solution"])
            if edited is not None and edited != record["solution"]:
                before, after = score([record, record], [record["solution"], edited])
                return {"edit": name, "direction": direction, "term": term, "question": record["text"],
                        "solution": record["solution"], "edited": edited, "before": before, "after": after}
    return None


def probe_example(health: Health) -> Any:
    """The worked probe of :func:`one_probe` as a table: the right solution and its edit with the term's score,
    and whether the score moved the way the edit must move it (down; ``same`` for an edit that must not matter)."""
    e = health.example
    if e is None:
        return Note("No probe example: no right solution to edit, or the run's answer term was not scored.")
    before, after = e["before"], e["after"]
    moved = None if before is None or after is None else after - before
    must = {"down": "must go down", "same": "must stay the same"}.get(e["direction"], f"must go {e['direction']}")
    rows = [{"": "right solution", "text": e["solution"], e["term"]: before},
            {"": f"edited: {e['edit']} ({must})", "text": e["edited"], e["term"]: after}]
    change = "not scored" if moved is None else f"{moved:+.3f}"
    return text_table(rows, wrap=("text",), code=("text",) if e.get("code") else (), gradient=(e["term"],),
                      caption=f"{e['question']} — {e['term']} moved {change}")


def _reward_terms(cfg: RunConfig, held: HeldOut, health: Health) -> None:
    """rV and rF on the held-out samples, where the formula names them: their distributions and coverage."""
    terms = verifiable_terms(world_for(cfg), parse_reward_formula(cfg.ppo.reward_formula).terms, held.records,
                             held.solutions)
    verdict = dg.check_reward_terms(terms, held.source)
    if verdict is not None:
        health.verdicts.append(verdict)
        health.scores.update({f"{k} (sampled solutions)": v for k, v in terms.items() if k in ("rV", "rF")})


# ------------------------------------------------------------------------------ 05: PPO log

def check_ppo_log(cfg: RunConfig, paths: RunPaths, health: Health, scored: Scored) -> None:
    path = paths.ppo_log
    log = list(read_jsonl(path)) if path.exists() else []
    truth = check_reward_truth_log(log, cfg.diagnostics, paths.rel(path)) if log else None
    if log:
        health.ppo_log = log
        health.verdicts += [dg.check_low_ra_log(log, cfg.diagnostics, paths.rel(path)),
                            dg.check_kl_blowup(log, cfg.diagnostics, paths.rel(path))]
        value = dg.check_value_head(log, cfg.diagnostics, cfg.ppo, paths.rel(path))  # None: GRPO's log
        steps = dg.check_step_credit_log(log, paths.rel(path))  # None: r on the last token
        health.verdicts += [v for v in (value, steps) if v is not None]
    else:
        health.skipped.append(f"kl_blowup: {paths.rel(path)} not found (run {PPO})")
    held = scored.heldout
    if not log and held is not None:  # check 2 before PPO: the PRM's rA on sampled solutions
        answer = [a for a in held.ra if a is not None]
        health.verdicts.append(dg.check_low_ra_share(answer, cfg.diagnostics, f"{paths.rel(paths.prm_model)} rA "
                                                                               f"on {len(answer)} solutions"))
    elif not log:
        health.skipped.append(f"low_ra_share: neither {paths.rel(path)} nor a PRM to score with")
    if truth is None and held is not None and any(c is not None for c in held.correct):
        # before PPO (or a log without truth fields): the PRM's rA, and r with the IRM's rI, on held-out samples
        raw = step_verifier_scorer(world_for(cfg))(held.records, held.solutions) \
            if cfg.reward_model.answer_reward == "verifier" else held.ra  # the rA PPO gets
        ra = [0.0 if a is None else a for a in raw]
        reward = ra
        if scored.irm is not None:
            formula = parse_reward_formula(cfg.ppo.reward_formula)
            terms = verifiable_terms(world_for(cfg), formula.terms, held.records, held.solutions)
            n = len(ra)
            ri = scored.irm([r["text"] for r in held.records])
            reward = [formula(i, a, v, f) for i, a, v, f in zip(ri, ra, terms.get("rV", [0.0] * n),
                                                                 terms.get("rF", [0.0] * n))]
        truth = check_reward_truth(held.correct, reward, ra, cfg.diagnostics, held.source + ", judged by the "
                                   "verifier", "On held-out samples of the SFT model")
    if truth is not None:
        health.verdicts.append(truth)
    else:
        health.skipped.append("reward_truth: no responses a verifier judges (no PPO log with truth fields, no "
                              "held-out PRM samples of a world with a verifier)")


# ------------------------------------------------------------------------------ 06: the A/B

def check_sft_vs_ppo(cfg: RunConfig, paths: RunPaths, health: Health) -> None:
    benches = sorted(p.stem for p in paths.eval_model_dir("sft").glob("*.jsonl")
                     if not p.name.endswith(".stale.jsonl") and paths.eval_items("ppo", p.stem).exists())
    pairs = [(f"sft_vs_ppo_{b}", b, paths.eval_items("sft", b), paths.eval_items("ppo", b)) for b in benches]
    if not pairs and paths.ppo_heldout("ppo").exists():
        pairs = [("sft_vs_ppo", world_for(cfg).heldout_benchmark, paths.ppo_heldout("sft"), paths.ppo_heldout("ppo"))]
    if not pairs:
        health.skipped.append(f"sft_vs_ppo: no SFT and PPO results on the same benchmark (run {EVAL})")
    for check, bench, a, b in pairs:
        verdict = ab_verdict(list(read_jsonl(a)), list(read_jsonl(b)), cfg.diagnostics,
                             f"{paths.rel(a)} vs {paths.rel(b)}", seed=cfg.base.seed)
        if verdict is None:
            health.skipped.append(f"{check}: {paths.rel(a)} and {paths.rel(b)} share no item")
            continue
        health.verdicts.append(replace(verdict, check=check))
        suffix = f" {bench}" if len(pairs) > 1 else ""
        health.accuracy.update({f"SFT{suffix}": verdict.numbers["sft_accuracy"],
                                f"PPO{suffix}": verdict.numbers["ppo_accuracy"]})


# ------------------------------------------------------------------------------ all of them

def check_artifacts(cfg: RunConfig, paths: RunPaths, score: bool = True) -> Health:
    """Every check whose artifacts exist, in pipeline order; ``score=False`` skips loading the reward models. Reads
    only: ``rleif doctor`` runs it on a run it must not write into."""
    world_for(cfg)  # the run's world: its benchmarks and probe sets are asked below
    health = Health()
    check_evolve(cfg, paths, health)
    check_dedup(cfg, paths, health)
    check_sft_data(cfg, paths, health)
    scored = check_reward_models(cfg, paths, health, score)
    check_ppo_log(cfg, paths, health, scored)
    check_sft_vs_ppo(cfg, paths, health)
    return health


def run_diagnostics(cfg: RunConfig, paths: RunPaths, score: bool = True) -> Health:
    """Stage 07: every check whose artifacts exist (:func:`check_artifacts`), written to
    ``07_reward_diagnostics/verdicts.json``."""
    health = check_artifacts(cfg, paths, score)
    write_verdicts(paths, health)
    return health


def write_verdicts(paths: RunPaths, health: Health) -> Path:
    """``07_reward_diagnostics/verdicts.json``: every verdict and the checks skipped."""
    path = paths.verdicts
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"verdicts": [v.to_dict() for v in health.verdicts], "skipped": health.skipped},
                               indent=2) + "\n")
    return path


def verdicts_html(verdicts: list[Verdict]) -> str:
    """An HTML table of verdicts, the status cell in its colour, for a notebook's ``display(HTML(...))``."""
    def numbers(v: Verdict) -> str:
        return ", ".join(f"{k}={fmt_number(x)}" for k, x in v.numbers.items())

    head = "".join(f"<th style='text-align:left'>{h}</th>" for h in ("check", "status", "numbers", "thresholds",
                                                                      "source", "advice"))
    rows = "".join(
        f"<tr><td>{escape(v.check)}</td><td style='background:{STATUS_COLORS[v.status]};color:white;"
        f"font-weight:bold;text-align:center'>{v.status}</td><td>{escape(numbers(v))}</td>"
        f"<td>{escape(json.dumps(v.thresholds))}</td><td>{escape(v.source)}</td><td>{escape(v.advice)}</td></tr>"
        for v in verdicts)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
