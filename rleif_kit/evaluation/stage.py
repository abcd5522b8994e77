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
disagree go to ``06_eval/math_verify_disagreements.jsonl`` with both readings. Every row carries its item's family
where it has one (tiny_code's task family, MATH's subject), and the summary breaks SFT vs PPO down by family, with
each model's failures by class where the world classes them (``families.py``). What the notebook shows — its intro
in the run's words, the tables, the plots, the wrong answers — is at the end of this module.

    python -m rleif_kit.evaluation --params params/tiny-cpu.toml [--limit 50]
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.checks.verdict_table import verdict_table
from rleif_kit.checks.verdicts import ab_verdict, format_verdicts
from rleif_kit.core.config import STOP_LISTS, RunConfig
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_eval_bars, save_figure
from rleif_kit.core.progress import Bar
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.tables import Note, text_table
from rleif_kit.core.stages import EVAL, PPO, SFT
from rleif_kit.core.verdict import Verdict
from rleif_kit.evaluation.families import family_breakdown, family_rows, has_families, share
from rleif_kit.evaluation.generators import LocalModel, ServedModel
from rleif_kit.evaluation.scoring import check_code, check_response, math_verify_disagreements, summarize
from rleif_kit.evaluation.vllm_model import VLLMModel
from rleif_kit.models.loading import SFT_INFO
from rleif_kit.models.refs import model_ref
from rleif_kit.sandbox.runner import describe_sandbox
from rleif_kit.worlds import world_for
from rleif_kit.worlds.benchmarks import benchmark as get_benchmark
from rleif_kit.worlds.benchmarks import benchmark_world, item_family, load_items, prompt_for
from rleif_kit.worlds.math.second_opinion import version as math_verify_version
from rleif_kit.worlds.tiny_corpus import ensure_base_model
from rleif_kit.worlds.words import run_words

# The stage's public face: what its notebook and ``python -m rleif_kit.evaluation`` (through ``rleif eval``'s
# run_stage) use. The plot (core/plots.py) and the verdicts' text (checks/verdicts.py) are defined there and offered
# here, so that the notebook reads one stage module.
__all__ = ["EvalResult", "run_eval", "eval_intro", "wrong_answers", "wrong_answer_rows", "wrong_answer_table",
           "family_table", "plot_results", "plot_families", "plot_eval_bars", "save_figure", "format_verdicts",
           "verdict_table"]

STAGE = EVAL


@dataclass
class EvalResult:
    """What the notebook shows and records; ``summary[model][benchmark]`` holds ``scoring.summarize``."""

    summary: dict = field(default_factory=dict)
    ab: dict = field(default_factory=dict)  # benchmark -> Verdict (SFT vs PPO)
    notes: list = field(default_factory=list)  # models skipped, stale results moved aside
    pending: int = 0  # items a served model failed on after retries: rerun to finish
    sandbox: str | None = None  # the HumanEval sandbox's protections, when HumanEval ran
    families: dict = field(default_factory=dict)  # benchmark -> its SFT-vs-PPO breakdown (evaluation/families.py)

    def metric(self, key: str) -> dict[str, dict[str, Any]]:
        """``{model: {benchmark: value}}`` of one summary figure, where it is defined (a model with none left out:
        ``{}`` when no benchmark of the run has it, compat on a code run)."""
        out = {m: {b: s[key] for b, s in benches.items() if s.get(key) is not None}
               for m, benches in self.summary.items()}
        return {m: v for m, v in out.items() if v}

    def verdicts(self) -> list[Verdict]:
        """The A/B verdicts, one per benchmark, named ``sft_vs_ppo_<benchmark>`` (what metrics.json records)."""
        return [dataclasses.replace(v, check=f"sft_vs_ppo_{b}") for b, v in self.ab.items()]

    def gains(self) -> dict[str, dict[str, Any]]:
        """``{benchmark: {gain, ci95, n}}`` of the A/B: PPO minus SFT with its paired-bootstrap interval."""
        return {b: {k: v.numbers[k] for k in ("gain", "ci95", "n")} for b, v in self.ab.items()}

    def table(self) -> list[dict[str, Any]]:
        """One row per model and benchmark, for a table: the figures that apply to some benchmark of the run (a
        column no row has a value for, compat on a code run, is left out), never a nested dict (``scorers``
        repeats the accuracy columns)."""
        rows = [{"model": m, "benchmark": b, **{k: v for k, v in s.items() if not isinstance(v, dict)}}
                for m, benches in self.summary.items() for b, s in benches.items()]
        keep = [k for k in dict.fromkeys(k for r in rows for k in r) if any(r.get(k) is not None for r in rows)]
        return [{k: r.get(k) for k in keep} for r in rows]

    def family_shares(self, benchmark: str) -> dict[str, dict[str, float]]:
        """``{model: {family: share right}}`` of one benchmark's breakdown, its families only (for the plot)."""
        entries = [e for e in self.families.get(benchmark, []) if e["family"] != "all"]
        models = list(dict.fromkeys(m for e in entries for m in e["n"]))
        return {m: {e["family"]: share(e, m) for e in entries if share(e, m) is not None} for m in models}


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
        rows = [{**check_response(benchmark, item, text, ev), "id": rid} for (rid, item, _), text in done]
    else:
        samples = [{"id": rid, "task_id": item["id"], "completion_id": k, "response": text}
                   for (rid, item, k), text in done]
        problems = {item["id"]: item["problem"] for (_, item, _), _ in done}
        rows = check_code(samples, problems, timeout=ev.code_timeout, workers=ev.code_workers or None,
                          benchmark=benchmark) if samples else []
    return with_families(benchmark, rows, [item for (_, item, _), _ in done])


def with_families(benchmark: str, rows: list[dict], items: Sequence[dict]) -> list[dict]:
    """Each row with its item's ``family`` (``worlds.benchmarks.item_family``: tiny_code's task family, MATH's
    subject) where it has one and the row does not yet (rows of a run made before rows carried it)."""
    family = {it["id"]: item_family(benchmark, it) for it in items}
    for r in rows:
        found = family.get(r.get("task_id", r["id"]))
        if found and not r.get("family"):
            r["family"] = found
    return rows


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
            rows[label, bench] = with_families(bench, got, items[bench])
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
    for bench in ev.benchmarks:
        got = {label: rows[label, bench] for label, _ in sources if (label, bench) in rows}
        result.families[bench] = family_breakdown(got, benchmark_world(bench).failure_class)
    second = _second_opinion(paths, rows)
    write_json_atomic(paths.eval_summary, {"summary": result.summary, "notes": result.notes,
                                               "ab": {b: v.to_dict() for b, v in result.ab.items()},
                                               "pending": result.pending, "sandbox": result.sandbox,
                                               "families": result.families,
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


def wrong_answers(paths: RunPaths, per_file: int = 3, width: int = 240, world: Any = None) -> list[dict[str, Any]]:
    """A few wrong rows of every result file: model, benchmark, id, the row's family, gold, the extracted answer
    (a program's verdict for code), and the response — a program whole as it ran (its bug may be on its first
    line), an answer's last ``width`` characters (where its answer is). With the run's ``world``, each row's
    failure class too, and the first row of each class comes first: one example of every kind of failure."""
    out = []
    for path in sorted(paths.eval_dir.glob("*/*.jsonl")):
        if path.name.endswith(".stale.jsonl"):
            continue
        wrong = [r for r in read_jsonl(path) if not r.get("correct")]
        kinds = {id(r): world.failure_class(r) for r in wrong} if world is not None else {}
        if kinds:  # the first row of each class, in file order, then the rest
            first = {}
            for r in wrong:
                first.setdefault(kinds[id(r)], id(r))
            wrong = sorted(wrong, key=lambda r: id(r) not in first.values())
        out += [{"model": path.parent.name, "benchmark": path.stem, "id": r["id"], "family": r.get("family"),
                 "gold": r.get("gold"), "answer": r.get("answer", r.get("result")),
                 **({"failure": kinds[id(r)]} if kinds else {}),
                 "response": r["completion"] if "completion" in r else (r.get("response") or "")[-width:]}
                for r in wrong[:per_file]]
    return out


# ------------------------------------------------------------------ what the notebook shows


def eval_intro(cfg: RunConfig) -> str:
    """06's title and what it compares, in the run's words (``worlds/words.py``), as Markdown for the notebook."""
    w = run_words(cfg)
    benches = ", ".join(f"`{b}`" for b in cfg.eval.benchmarks)
    code = (f" A {w.task}'s program runs against its hidden tests in the sandbox: {w.right} when every test "
            "passes; a failed one is classed by why (syntax error, wrong value, exception, timeout)."
            if w.code_language else "")
    return (f"### {w.world}: SFT vs PPO on {benches}, by {w.score}\n\n"
            f"World: {w.about}. The PPO model was trained on the reward `{w.shown}`:\n\n" + "\n".join(w.term_lines())
            + f"\n\nThe headline is {w.score}: the share of {w.tasks} {w.right}.{code} Where a benchmark's {w.tasks} "
            "come in families, a table below the results breaks the comparison down by family.")


def plot_results(result: EvalResult, cfg: RunConfig) -> Any:
    """Each model's headline figure per benchmark, named in the run's words (accuracy, pass@1)."""
    score = run_words(cfg).score
    return plot_eval_bars(result.metric("accuracy"), title=f"{score} per benchmark", ylabel=f"{score} (%)")


def family_table(result: EvalResult, cfg: RunConfig) -> Any:
    """The SFT-vs-PPO breakdown by family (``evaluation/families.py``) as a table, or a note when no benchmark of
    the run has families (GSM8k, HumanEval, arith)."""
    shown = {b: f for b, f in result.families.items() if has_families(f)}
    if not shown:
        return Note("No benchmark of this run groups its items into families: the results above are the whole "
                    "comparison.")
    return text_table(family_rows(shown, run_words(cfg).score), caption="SFT vs PPO by family (right / n)")


def plot_families(result: EvalResult, cfg: RunConfig) -> Any:
    """Grouped bars of each family's share right per model, one figure for the first benchmark with families
    (None when none has)."""
    bench = next((b for b, f in result.families.items() if has_families(f)), None)
    if bench is None:
        return None
    w = run_words(cfg)
    return plot_eval_bars(result.family_shares(bench), title=f"{bench}: {w.score} by family",
                          ylabel=f"{w.score} (%)")


def wrong_answer_rows(cfg: RunConfig, paths: RunPaths, per_file: int = 3) -> list[dict[str, Any]]:
    """:func:`wrong_answers` with the run's world (one of each failure class first), a column no row has a value
    for (gold for code, family for GSM8k) left out: what 06 shows and records for the report."""
    rows = wrong_answers(paths, per_file, world=world_for(cfg))
    keep = [k for k in (rows[0] if rows else {}) if any(r.get(k) not in (None, "") for r in rows)]
    return [{k: r.get(k) for k in keep} for r in rows]


def wrong_answer_table(cfg: RunConfig, paths: RunPaths, per_file: int = 3) -> Any:
    """:func:`wrong_answer_rows` as a table: the response as code (monospace, whitespace and line breaks kept,
    never cut by the table)."""
    rows = wrong_answer_rows(cfg, paths, per_file)
    if not rows:
        return Note("No wrong answer to show: every evaluated response is right (or nothing was evaluated yet).")
    view = text_table(rows, wrap=("response", "answer"))
    return view.set_properties(subset=["response"], **{"font-family": "monospace"}) if "response" in rows[0] else view
