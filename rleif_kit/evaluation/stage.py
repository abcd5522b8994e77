"""Stage 06: evaluate the SFT and PPO models on GSM8k, MATH, HumanEval, MBPP and the arithmetic world.

For each model in ``[eval].models`` and each benchmark in ``[eval].benchmarks``: generate with the
exact training prompt (greedy by default, ``max_new_tokens``, stop strings), check every answer
strictly (and the flexible / compat readings beside it), and append one row per item to
``06_eval/<model>/<benchmark>.jsonl`` as soon as its chunk is checked. A rerun skips the items
already there, so a killed run, or a run with a larger ``limit``, continues where it stopped; rows
made with other generation settings or by an older copy of the model are moved aside
(``*.stale.jsonl``), never mixed in. Then the summary (accuracy strict / flexible / compat, pass@k)
and the SFT-vs-PPO A/B — a paired bootstrap on the items both answered — go to ``summary.json``. GSM8k and
MATH rows also carry math-verify's verdict, a second opinion beside the strict headline; the items where the two
disagree go to ``06_eval/math_verify_disagreements.jsonl`` with both readings.

    python -m rleif_kit.evaluation --params params/tiny-cpu.toml [--limit 50]
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.checks.verdicts import ab_verdict, format_verdicts
from rleif_kit.core.config import STOP_LISTS, RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_eval_bars, save_figure
from rleif_kit.core.progress import Bar
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import EVAL, PPO, SFT
from rleif_kit.core.verdict import Verdict
from rleif_kit.evaluation.generators import LocalModel, ServedModel
from rleif_kit.evaluation.scoring import check_code, check_response, math_verify_disagreements, summarize
from rleif_kit.evaluation.vllm_model import VLLMModel
from rleif_kit.models.loading import SFT_INFO
from rleif_kit.models.refs import model_ref
from rleif_kit.sandbox.runner import describe_sandbox
from rleif_kit.worlds import world_for
from rleif_kit.worlds.benchmarks import benchmark as get_benchmark
from rleif_kit.worlds.benchmarks import load_items, prompt_for
from rleif_kit.worlds.math.second_opinion import version as math_verify_version
from rleif_kit.worlds.tiny_corpus import ensure_base_model

# The stage's public face: what its notebook and ``python -m rleif_kit.evaluation`` (through ``rleif eval``'s
# run_stage) use. The plot (core/plots.py) and the verdicts' text (checks/verdicts.py) are defined there and offered
# here, so that the notebook reads one stage module.
__all__ = ["EvalResult", "run_eval", "wrong_answers", "plot_eval_bars", "save_figure", "format_verdicts"]

STAGE = EVAL


@dataclass
class EvalResult:
    """What the notebook shows and records; ``summary[model][benchmark]`` holds ``scoring.summarize``."""

    summary: dict = field(default_factory=dict)
    ab: dict = field(default_factory=dict)  # benchmark -> Verdict (SFT vs PPO)
    notes: list = field(default_factory=list)  # models skipped, stale results moved aside
    pending: int = 0  # items a served model failed on after retries: rerun to finish
    sandbox: str | None = None  # the HumanEval sandbox's protections, when HumanEval ran

    def metric(self, key: str) -> dict[str, dict[str, Any]]:
        """``{model: {benchmark: value}}`` of one summary figure, where it is defined."""
        return {m: {b: s[key] for b, s in benches.items() if s.get(key) is not None}
                for m, benches in self.summary.items()}

    def verdicts(self) -> list[Verdict]:
        """The A/B verdicts, one per benchmark, named ``sft_vs_ppo_<benchmark>`` (what metrics.json records)."""
        return [dataclasses.replace(v, check=f"sft_vs_ppo_{b}") for b, v in self.ab.items()]

    def gains(self) -> dict[str, dict[str, Any]]:
        """``{benchmark: {gain, ci95, n}}`` of the A/B: PPO minus SFT with its paired-bootstrap interval."""
        return {b: {k: v.numbers[k] for k in ("gain", "ci95", "n")} for b, v in self.ab.items()}

    def table(self) -> list[dict[str, Any]]:
        """One row per model and benchmark, for a DataFrame."""
        return [{"model": m, "benchmark": b, **s} for m, benches in self.summary.items() for b, s in benches.items()]


def local_generator(path: str | Path, name: str | None, ev: Any, seed: int = 0,
                    key: str = "[eval] backend") -> LocalModel:
    """A model on this machine, generated with ``ev.backend``: transformers (the reference) or vLLM."""
    if ev.backend == "vllm":
        return VLLMModel(path, name, ev.batch_size, seed=seed, key=key)
    return LocalModel(path, name, ev.batch_size)


def stop_for(benchmark: str, ev: Any) -> tuple[str, ...]:
    """Math stops at WizardMath's strings (``[eval] stop``, else the list ``stop_list`` names); code at EOS only
    (a stop word may be legal code), as WizardCoder's scripts did."""
    if get_benchmark(benchmark).runs_code:
        return ()
    return tuple(ev.stop) if ev.stop else tuple(STOP_LISTS[ev.stop_list])


def _meta(generator: Any, benchmark: str, ev: Any, folder: Path, run_dir: Path | None = None) -> dict[str, Any]:
    """Everything that decides a row's text and verdict: a result file made under another meta is stale. A model
    of the run (``run_dir``) is named by its path from the meta's ``folder``, so a moved run still resumes."""
    model = dict(generator.fingerprint)
    if run_dir is not None and isinstance(model.get("path"), str):
        model["path"] = model_ref(model["path"], folder, run_dir, given=model["path"])
    meta = {"benchmark": benchmark, "model": model, "cot": ev.cot_prompt,
            "max_new_tokens": ev.max_new_tokens, "temperature": ev.temperature, "stop": list(stop_for(benchmark, ev))}
    if ev.temperature > 0:
        meta["top_p"] = ev.top_p
    meta.update(get_benchmark(benchmark).meta(ev))  # what else decides its verdicts (compat scorer, code prompt)
    return meta


def _claim(out_path: Path, meta: dict) -> str | None:
    """Make ``out_path`` safe to resume under ``meta``: stale results are moved aside (with a note)."""
    meta_path = out_path.with_suffix(".meta.json")
    try:
        old = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.exists() else None
    except (OSError, ValueError):  # cut short (a kill, a full disk before the atomic write): the results are stale
        old = {"meta": "unreadable"}
    note = None
    if old is not None and old != meta and out_path.exists():
        stale = out_path.with_suffix(".stale.jsonl")
        out_path.replace(stale)
        changed = sorted(k for k in set(old) | set(meta) if old.get(k) != meta.get(k))
        where = f"{out_path.parent.name}/{out_path.name}"  # <model>/<benchmark>.jsonl: notes go into summary.json
        note = f"{where}: made with other {', '.join(changed)}; moved to {stale.name}, starting over"
        print(note)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(meta_path, meta)
    return note


def _jobs(benchmark: str, items: Sequence[dict], ev: Any) -> list[tuple[str, dict, int]]:
    """(row id, item, sample index); HumanEval and MBPP have ``n_samples`` per problem, ids ``<task_id>#<k>``."""
    if not get_benchmark(benchmark).runs_code:
        return [(it["id"], it, 0) for it in items]
    return [(f"{it['id']}#{k}", it, k) for it in items for k in range(ev.n_samples)]


def _check(benchmark: str, jobs: list, texts: list[str | None], ev: Any) -> list[dict]:
    """Rows for the generated texts of one chunk (a failed request gets no row: a rerun retries it)."""
    done = [(job, text) for job, text in zip(jobs, texts) if text is not None]
    if not get_benchmark(benchmark).runs_code:
        return [{**check_response(benchmark, item, text, ev), "id": rid} for (rid, item, _), text in done]
    samples = [{"id": rid, "task_id": item["id"], "completion_id": k, "response": text}
               for (rid, item, k), text in done]
    problems = {item["id"]: item["problem"] for (_, item, _), _ in done}
    return check_code(samples, problems, timeout=ev.code_timeout, workers=ev.code_workers or None,
                      benchmark=benchmark) if samples else []


def evaluate_benchmark(generator: Any, benchmark: str, items: Sequence[dict], out_path: str | Path, ev: Any, *,
                       progress: bool = True, run_dir: Path | None = None) -> tuple[list[dict], int, str | None]:
    """Generate and check every item not yet in ``out_path``, appending rows chunk by chunk.

    Returns (the rows of ``items``, in item order, including those of earlier runs; how many are
    still pending because a request failed; the stale-results note or None).
    """
    out_path = Path(out_path)
    note = _claim(out_path, _meta(generator, benchmark, ev, out_path.parent, run_dir))
    rows = {r["id"]: r for r in read_jsonl(out_path)}
    jobs = _jobs(benchmark, items, ev)
    todo = [j for j in jobs if j[0] not in rows]
    bar = Bar(len(jobs), f"{generator.name} · {benchmark}", EVAL, initial=len(jobs) - len(todo),
              disable=not progress)
    try:
        with JsonlWriter(out_path, fsync_every=64) as out:
            for start in range(0, len(todo), generator.chunk):
                chunk = todo[start:start + generator.chunk]
                prompts = [prompt_for(benchmark, item, ev) for _, item, _ in chunk]
                texts = generator.complete(prompts, ev, stop_for(benchmark, ev), [k for _, _, k in chunk])
                for row in _check(benchmark, chunk, texts, ev):
                    out.write(row)
                    rows[row["id"]] = row
                bar.update(len(chunk))
    finally:
        bar.close()
    done = [rows[rid] for rid, _, _ in jobs if rid in rows]
    return done, len(jobs) - len(done), note


def local_model(cfg: RunConfig, path: Any, label: str) -> Any:
    """A model on this machine, generated with ``[eval] backend``: transformers (the reference) or vLLM."""
    return local_generator(path, label, cfg.eval, seed=cfg.base.seed)


def model_sources(cfg: RunConfig, paths: RunPaths,
                  settings: Any = None) -> tuple[list[tuple[str, Callable]], list[str]]:
    """([(label, benchmark -> generator)], notes on the models skipped) for ``[eval].models``."""
    ev, sources, notes = cfg.eval, [], []
    local = {"sft": (paths.sft_model, SFT_INFO, SFT), "ppo": (paths.ppo_model, "ppo_info.json", PPO)}
    for label in ev.models:
        if label == "base":
            base = ensure_base_model(cfg)
            if not Path(base).is_dir():  # a hub id: its snapshot in the Hugging Face cache
                from huggingface_hub import snapshot_download  # heavy: loaded on first use

                base = snapshot_download(base)
            model = local_model(cfg, base, "base")
            sources.append((label, lambda bench, m=model: m))
        elif label in local:
            path, marker, stage = local[label]
            if not (path / marker).exists():
                notes.append(f"{label}: {paths.rel(path)} not found (run {stage} first); skipped")
                continue
            model = local_model(cfg, path, label)
            sources.append((label, lambda bench, m=model: m))
        else:  # served: one model per role, made on first use
            if settings is None:
                raise ValueError("[eval] models includes 'served' but no settings.json was given (settings_path)")
            served: dict[str, Any] = {}

            def make(bench: str, served=served) -> Any:
                role = get_benchmark(bench).role
                if role not in served:
                    served[role] = ServedModel(settings.endpoint(role), cfg.evol_instruct.concurrency)
                return served[role]
            sources.append((label, make))
    return sources, notes


def run_eval(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True,
             sources: list[tuple[str, Callable]] | None = None) -> EvalResult:
    """Every model on every benchmark (resumable), then the summary and the SFT-vs-PPO A/B."""
    world_for(cfg)  # the run's world (its benchmarks are looked up by name below) and what it cannot do
    ev, result = cfg.eval, EvalResult()
    if sources is None:
        sources, result.notes = model_sources(cfg, paths, settings)
    for note in result.notes:
        print(note)
    if not sources:
        raise FileNotFoundError(f"{STAGE}: nothing to evaluate ({'; '.join(result.notes) or '[eval] models is empty'})")
    items = {b: load_items(b, settings=settings, cfg=cfg, paths=paths, limit=ev.limit) for b in ev.benchmarks}
    if any(get_benchmark(b).runs_code for b in items):
        result.sandbox = describe_sandbox()
        print(result.sandbox)
    rows: dict[tuple[str, str], list[dict]] = {}
    for label, make in sources:
        used = []
        for bench in ev.benchmarks:
            generator = make(bench)
            used.append(generator)
            got, pending, note = evaluate_benchmark(generator, bench, items[bench], paths.eval_items(label, bench),
                                                    ev, progress=progress, run_dir=paths.output_dir)
            rows[label, bench] = got
            result.summary.setdefault(label, {})[bench] = summarize(bench, got)
            result.pending += pending
            result.notes += [note] if note else []
        for generator in {id(g): g for g in used}.values():
            generator.close()
    for bench in ev.benchmarks:
        if ("sft", bench) in rows and ("ppo", bench) in rows:
            verdict = ab_verdict(rows["sft", bench], rows["ppo", bench], cfg.diagnostics,
                                 f"{paths.rel(paths.eval_items('sft', bench))} vs "
                                 f"{paths.rel(paths.eval_items('ppo', bench))}", seed=cfg.base.seed)
            if verdict is not None:
                result.ab[bench] = verdict
    second = _second_opinion(paths, rows)
    write_json_atomic(paths.eval_summary, {"summary": result.summary, "notes": result.notes,
                                               "ab": {b: v.to_dict() for b, v in result.ab.items()},
                                               "pending": result.pending, "sandbox": result.sandbox,
                                               **({"math_verify": second} if second else {})})
    return result


def _second_opinion(paths: RunPaths, rows: dict[tuple[str, str], list[dict]]) -> dict[str, Any] | None:
    """Where the strict scorer and math-verify disagree, every model and benchmark, into one file beside
    summary.json (both readings on each line); what summary.json says of it. None when no benchmark has it."""
    benches = {b for _, b in rows if "math_verify_correct" in get_benchmark(b).summary}
    if not benches:
        return None
    lines = [d for (model, bench), got in rows.items() if bench in benches
             for d in math_verify_disagreements(got, model=model, benchmark=bench)]
    out = paths.math_verify_disagreements
    write_jsonl(out, lines)
    return {"version": math_verify_version(), "disagreements": out.name, "n": len(lines),
            "headline": "accuracy (the kit's strict scorer); math_verify_accuracy is a second opinion"}


def wrong_answers(paths: RunPaths, per_file: int = 3, width: int = 240) -> list[dict[str, Any]]:
    """The first few wrong rows of every result file, the response's last ``width`` characters shown."""
    out = []
    for path in sorted(paths.eval_dir.glob("*/*.jsonl")):
        if path.name.endswith(".stale.jsonl"):
            continue
        wrong = [r for r in read_jsonl(path) if not r.get("correct")][:per_file]
        out += [{"model": path.parent.name, "benchmark": path.stem, "id": r["id"], "gold": r.get("gold"),
                 "answer": r.get("answer", r.get("result")), "response": (r.get("response") or "")[-width:]}
                for r in wrong]
    return out
