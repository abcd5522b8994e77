"""``rleif eval``: a run's 06_eval stage, one benchmark on one model, scoring samples made elsewhere,
and the A/B table of two result directories.

    rleif eval params/tiny-cpu.toml [--limit 50] [--settings settings.json]
    rleif eval gsm8k --model PATH [--data PATH] [--limit 200] [--cot true] [--backend vllm] [--settings settings.json]
    rleif eval humaneval --served [NAME] --settings settings.json       # the endpoint's code_eval model
    rleif eval gsm8k --samples outputs.jsonl [--data PATH]               # lines: id, response, gold (or --data)
    rleif eval humaneval --samples samples.jsonl                         # lines: task_id, completion or response
    rleif eval mbpp --samples samples.jsonl [--data mbpp.jsonl]          # task_id 11 or "Mbpp/11"; mbppplus alike
    rleif eval compare reports/eval/sft reports/eval/ppo                 # A = baseline (SFT), B = candidate (PPO)

Generation settings come from ``[eval]``'s defaults, then settings.json's ``eval`` section (cot,
temperature, max_new_tokens), then the flags. Per-item results go to ``--out`` (default
``reports/eval/<model>/<benchmark>.jsonl``); a rerun into the same place resumes. For GSM8k and MATH the items
where the strict scorer and math-verify disagree go beside them, to ``<benchmark>.math_verify_disagreements.jsonl``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from rleif_kit.core.exits import EXIT_STOPPED
from rleif_kit.core.jsonl import read_user_jsonl, write_jsonl
from rleif_kit.core.run_setup import setup
from rleif_kit.core.config import EvalConfig
from rleif_kit.core.settings import Endpoint, SettingsError, load_settings
from rleif_kit.evaluation.generators import ServedModel
from rleif_kit.evaluation.scoring import (check_code, check_response, compare_dirs, format_compare,
                                          math_verify_disagreements, summarize)
from rleif_kit.evaluation.stage import STAGE, evaluate_benchmark, local_generator, run_eval
from rleif_kit.sandbox.runner import describe_sandbox
from rleif_kit.worlds.benchmarks import BENCHMARKS, benchmark as get_benchmark, load_items

FLAGS = {"backend": "backend", "limit": "limit", "cot": "cot_prompt", "max_new_tokens": "max_new_tokens",
         "batch_size": "batch_size", "n_samples": "n_samples", "temperature": "temperature"}


def eval_config(settings: Any = None, **flags: Any) -> EvalConfig:
    """``[eval]`` defaults, then settings.json's eval section, then the flags that were given."""
    values: dict[str, Any] = {}
    if settings is not None:
        values = {"cot_prompt": settings.eval.cot, "temperature": settings.eval.temperature,
                  "max_new_tokens": settings.eval.max_new_tokens}
    values.update({FLAGS[k]: v for k, v in flags.items() if v is not None})
    ev = dataclasses.replace(EvalConfig(), **values)
    problems = ev.problems()
    if problems:
        raise ValueError("\n".join(f"--{k.replace('_', '-')} = {getattr(ev, k)!r}: expected {what}"
                                   for k, what in problems))
    return ev


def served_endpoint(settings: Any, benchmark: str, name: str = "") -> Any:
    """The endpoint of role code_eval (HumanEval) or math_eval, serving ``name`` when one is given;
    without that role, ``name`` on the ``api`` section's server."""
    if settings is None:
        raise ValueError("--served needs --settings settings.json (where the endpoint is)")
    role = get_benchmark(benchmark).role
    try:
        endpoint = settings.endpoint(role)
    except SettingsError:
        if not name or settings.api.base_url is None:
            raise
        api = settings.api
        return Endpoint(role, name, api.base_url.rstrip("/"), api.api_key_env, api.timeout, api.max_retries,
                        api.max_reply_bytes, mode=api.mode)
    return dataclasses.replace(endpoint, name=name) if name else endpoint


def run_benchmark(benchmark: str, ev: EvalConfig, *, model: str | None = None, served: str | None = None,
                  data: str | None = None, settings: Any = None, out: str | None = None) -> tuple[dict, int, Path]:
    """One model on one benchmark, resumable: (summary, items pending, results file)."""
    if (model is None) == (served is None):
        raise ValueError(f"rleif eval {benchmark} needs one of --model PATH, --served [NAME] or --samples FILE")
    items = load_items(benchmark, settings=settings, data=data, limit=ev.limit)
    generator = (local_generator(model, None, ev, key="--backend") if model is not None
                 else ServedModel(served_endpoint(settings, benchmark, served)))
    path = Path(out or Path("reports") / "eval" / generator.name) / f"{benchmark}.jsonl"
    if get_benchmark(benchmark).runs_code:
        print(describe_sandbox())
    rows, pending, _ = evaluate_benchmark(generator, benchmark, items, path, ev)
    generator.close()
    write_disagreements(benchmark, rows, path, model=generator.name)
    return summarize(benchmark, rows), pending, path


def score_samples_file(benchmark: str, samples: str, ev: EvalConfig, *, data: str | None = None,
                       settings: Any = None, out: str | None = None) -> tuple[dict, Path]:
    """Score generations made elsewhere: (summary, per-item results file)."""
    lines = [r for _, r in read_user_jsonl(samples, "--samples")]
    if not lines:
        raise ValueError(f"{samples}: no samples")
    path = Path(out or Path("reports") / "eval" / Path(samples).stem) / f"{benchmark}.jsonl"
    if get_benchmark(benchmark).runs_code:
        problems = {it["id"]: it["problem"] for it in load_items(benchmark, settings=settings, data=data)}
        lines = _code_samples(benchmark, lines, problems, samples)
        rows = check_code(lines, problems, timeout=ev.code_timeout, workers=ev.code_workers or None,
                          benchmark=benchmark)
    else:
        needs_data = bool(data) or any("gold" not in s for s in lines)
        items = {it["id"]: it for it in load_items(benchmark, settings=settings, data=data)} if needs_data else {}
        rows = []
        for i, s in enumerate(lines, 1):
            if "response" not in s or "id" not in s or ("gold" not in s and str(s["id"]) not in items):
                raise ValueError(f"{samples}:{i}: needs 'id', 'response' and 'gold' (or an id that --data resolves)")
            item = {**items.get(str(s["id"]), {}), **{k: s[k] for k in ("gold", "question") if k in s}, "id": s["id"]}
            rows.append(check_response(benchmark, item, s["response"]))
    write_jsonl(path, rows)
    write_disagreements(benchmark, rows, path, model=Path(samples).stem)
    return summarize(benchmark, rows), path


def disagreements_file(results: Path) -> Path:
    """Beside ``<benchmark>.jsonl``: ``<benchmark>.math_verify_disagreements.jsonl`` (one per benchmark, so GSM8k
    and MATH results in one folder keep theirs)."""
    return results.with_suffix(".math_verify_disagreements.jsonl")


def write_disagreements(benchmark: str, rows: list[dict], results: Path, model: str) -> Path | None:
    """The items where the strict scorer and math-verify disagree, both readings on each line (none: an empty
    file), for a benchmark math-verify judges; None for the others."""
    if "math_verify_correct" not in get_benchmark(benchmark).summary:
        return None
    out = disagreements_file(results)
    write_jsonl(out, math_verify_disagreements(rows, model=model, benchmark=benchmark))
    return out


def _code_samples(benchmark: str, lines: list[dict], problems: dict, samples: str) -> list[dict]:
    """Sample lines with their task ids resolved (MBPP: 11, "11" and "Mbpp/11" name one task) and their
    completion ids numbered per task. For MBPP a ``completion`` that is raw model text (a code block, a response
    header: WizardCoder's raw generation files keep the model's text under ``completion``) is post-processed like
    a ``response``; plain code is kept as it is."""
    seen: dict[str, int] = {}
    out = []
    bench = get_benchmark(benchmark)
    for i, s in enumerate(lines, 1):
        task, text = bench.task_id(s.get("task_id")), s.get("completion", s.get("response"))
        if not isinstance(task, str) or task not in problems or not isinstance(text, str):
            raise ValueError(f"{samples}:{i}: needs a known 'task_id' of the {benchmark} data (such as "
                             f"{bench.task_example}) and a string 'completion' or 'response'")
        s = {**s, "task_id": task}
        if "completion" in s and bench.raw_completion(s["completion"]):
            s["response"] = s.pop("completion")
        seen[task] = seen.get(task, -1) + 1
        s.setdefault("completion_id", seen[task])
        s.setdefault("id", f"{task}#{s['completion_id']}")
        out.append(s)
    return out


def format_summary(benchmark: str, summary: dict) -> str:
    """One line: n, strict accuracy (the headline), and flexible / compat / math-verify (with its disagreements
    with strict) / pass@k / task errors where they apply."""
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    n = summary.get("math_verify_disagreements")
    disagree = "" if n is None else f" ({n} disagreement{'' if n == 1 else 's'} with strict)"
    extra = [f"{name} {pct(summary[key])}{disagree if key == 'math_verify_accuracy' else ''}"
             for key, name in (("flexible_accuracy", "flexible"), ("compat_accuracy", "compat"),
                               ("math_verify_accuracy", "math-verify"), ("steps_ok", "all steps right"))
             if key in summary]
    extra += [f"{k} {summary[k]:.3f}" for k in summary if k.startswith("pass@")]
    if summary.get("task_errors"):  # tasks whose data could not be judged, counted as failed
        extra.append(f"task errors {summary['task_errors']}")
    return f"{benchmark}: n={summary['n']} accuracy {pct(summary['accuracy'])} (strict)" + \
        (f"; {', '.join(extra)}" if extra else "")


def run_command(args: Any) -> int:
    """The ``rleif eval`` handler (see the module docstring for the forms)."""
    if args.target == "compare":
        if len(args.dirs) != 2:
            raise ValueError("rleif eval compare needs two result directories: A (baseline, SFT) and B (PPO)")
        print(format_compare(compare_dirs(*args.dirs), *args.dirs))
        return 0
    if args.dirs:
        raise ValueError(f"unexpected arguments: {' '.join(args.dirs)}")

    settings = load_settings(args.settings) if args.settings else None
    if args.target not in BENCHMARKS:
        return run_stage(args, settings)
    ev = eval_config(settings, **{k: getattr(args, k) for k in FLAGS})
    if args.samples:
        summary, path = score_samples_file(args.target, args.samples, ev, data=args.data, settings=settings,
                                           out=args.out)
        pending = 0
    else:
        summary, pending, path = run_benchmark(args.target, ev, model=args.model, served=args.served, data=args.data,
                                               settings=settings, out=args.out)
    print(format_summary(args.target, summary))
    mv = "math_verify_correct" in get_benchmark(args.target).summary
    print(f"per-item results: {path}" + (f"; math-verify disagreements: {disagreements_file(path)}" if mv else "")
          + (f"; {pending} items failed at the endpoint (rerun to retry)" if pending else ""))
    return EXIT_STOPPED if pending else 0  # resumable: a rerun retries them


def run_stage(args: Any, settings: Any) -> int:
    """``rleif eval PARAMS`` (and ``python -m rleif_kit.evaluation``): stage 06 of a run, a summary line per model."""
    if not args.target.endswith(".toml"):
        raise ValueError(f"{args.target!r} is neither a run config (.toml), a benchmark "
                         f"({', '.join(BENCHMARKS)}) nor 'compare'")
    overrides = list(args.overrides) + ([f"eval.limit={args.limit}"] if args.limit is not None else [])
    overrides += [f'eval.backend="{args.backend}"'] if args.backend is not None else []
    cfg, paths = setup(args.target, overrides, stage=STAGE)
    result = run_eval(cfg, paths, settings)
    for bench in cfg.eval.benchmarks:
        for model, benches in result.summary.items():
            print(f"{model:>8} · {format_summary(bench, benches[bench])}")
    for verdict in result.ab.values():
        print(verdict.line())
    print(f"per-item results and summary.json in {paths.eval_dir}")
    return EXIT_STOPPED if result.pending else 0
