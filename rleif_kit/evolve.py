"""Stage 01: Evol-Instruct — evolve seed instructions up and down for ``[evol_instruct].rounds`` rounds.

Each round, every lineage (one per seed) gets one operator, drawn from its root id and the round, so a
rerun makes the same choices. The evolved text is checked (``elimination.py``); a failed evolution
goes to ``eliminated.jsonl`` with its reason and the lineage keeps its parent for the next round.
API failures go to ``failed.jsonl`` and are retried by the next run, up to ``retry_failed`` attempts.

Crash safety: every outcome is appended to its JSONL file as soon as it is known (flushed; fsynced
every ``checkpoint_every`` records). A rerun replays the files, skips every id already decided and
continues, so a run killed at any moment loses at most the requests in flight.

    python -m rleif_kit.evolve --params params/tiny-cpu.toml [--dry-run]
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rleif_kit.config import RunConfig
from rleif_kit.jsonl import JsonlWriter, read_jsonl
from rleif_kit.evolvers import Outcome, Task, _child_record, make_evolver
from rleif_kit.operators import Operator, child_id, choose_operator, load_templates, operators_for
from rleif_kit.paths import RunPaths


@dataclass
class EvolveResult:
    kept: int = 0
    eliminated: int = 0
    failed: int = 0
    duplicate_ids: int = 0
    stopped_reason: str | None = None
    usage: dict = field(default_factory=dict)
    per_round: dict = field(default_factory=dict)  # round -> Counter(kept/eliminated/failed)
    per_operator: dict = field(default_factory=dict)  # operator -> Counter
    reasons: dict = field(default_factory=dict)  # elimination reason -> count


# ---------------------------------------------------------------- seeds


def load_seeds(cfg: RunConfig, paths: RunPaths) -> Iterator[dict]:
    """Seed records ``{"id", "root_id", "round": 0, "text", ...}``, streamed from the seed source."""
    ev = cfg.evol_instruct
    limit = ev.max_seeds or None
    if ev.seeds.startswith("arith:"):
        yield from _arith_seeds(cfg, paths, int(ev.seeds.split(":", 1)[1]))[:limit]
        return
    path = cfg.resolve(ev.seeds)
    if not path.exists():
        raise FileNotFoundError(f"[evol_instruct] seeds = {ev.seeds!r}: file not found ({path})")
    for i, rec in enumerate(read_jsonl(path)):
        if limit is not None and i >= limit:
            return
        text = rec.get("instruction", rec.get("question", rec.get("text")))
        if not isinstance(text, str):
            raise ValueError(f"{path}: seed {i + 1} has no 'instruction' (or 'question', 'text') string")
        sid = str(rec.get("id", f"seed-{i:06d}"))
        seed = {"id": sid, "root_id": sid, "round": 0, "text": text, "answer": rec.get("response", rec.get("answer"))}
        if "problem" in rec:  # an arithmetic-world record (e.g. the loop's previous 02_dedup/instructions.jsonl)
            seed["problem"] = rec["problem"]
        yield seed


def _arith_seeds(cfg: RunConfig, paths: RunPaths, n: int) -> list[dict]:
    """Arithmetic-world seeds, never one of the held-out problems."""
    from rleif_kit import arith
    from rleif_kit.sft_data import heldout_problems

    heldout = {p["question"] for p in heldout_problems(cfg, paths)}
    problems = arith.generate_problems(n + len(heldout) // 10 + 10, seed=cfg.base.seed + 1, prefix="seed",
                                       min_steps=cfg.arith.min_steps, max_steps=cfg.arith.max_steps,
                                       max_operand=cfg.arith.max_operand)
    seeds = [p for p in problems if p["question"] not in heldout][:n]
    return [{"id": p["id"], "root_id": p["id"], "round": 0, "text": p["question"], "answer": p["solution"],
             "problem": p["problem"]} for p in seeds]


# ---------------------------------------------------------------- the run


class EvolveFiles:
    """The stage's append-only files, and what a previous (possibly killed) run already decided."""

    def __init__(self, paths: RunPaths, fsync_every: int):
        d = paths.stage("01_evolve")
        self.evolved_path, self.eliminated_path, self.failed_path = (d / "evolved.jsonl", d / "eliminated.jsonl",
                                                                     d / "failed.jsonl")
        self.kept = {r["id"]: r for r in read_jsonl(self.evolved_path)}
        self.eliminated = {r["id"]: r for r in read_jsonl(self.eliminated_path)}
        self.attempts = Counter(r["id"] for r in read_jsonl(self.failed_path))
        self.writers = {k: JsonlWriter(p, fsync_every=fsync_every) for k, p in
                        (("kept", self.evolved_path), ("eliminated", self.eliminated_path),
                         ("failed", self.failed_path))}

    def write(self, outcome: Outcome) -> None:
        self.writers[outcome.kind].write(outcome.record)
        if outcome.kind == "kept":
            self.kept[outcome.record["id"]] = outcome.record
        elif outcome.kind == "eliminated":
            self.eliminated[outcome.record["id"]] = outcome.record
        else:
            self.attempts[outcome.record["id"]] += 1

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def plan_round(lineages: dict[str, dict], round_: int, files: EvolveFiles, cfg: RunConfig,
               operators: tuple[Operator, ...]) -> list[Task]:
    """Advance lineages already decided this round (from the files); return the tasks still to run."""
    ev, tasks = cfg.evol_instruct, []
    for root, current in list(lineages.items()):
        if current is None:
            continue  # blocked by an API failure earlier in this run: resumes next run
        op = choose_operator(root, round_, operators, ev.evolve_up_ratio, seed=cfg.base.seed)
        cid = child_id(root, round_, op.name)
        if cid in files.kept:
            lineages[root] = files.kept[cid]
        elif cid in files.eliminated:
            continue  # keeps its parent
        elif files.attempts[cid] >= ev.retry_failed:
            files.write(Outcome("eliminated", {**_child_record(Task(cid, current, round_, op), "", "-"),
                                               "reason": "api_error"}))
        else:
            tasks.append(Task(cid, current, round_, op))
    return tasks


async def _run_tasks(tasks: list[Task], evolver: Any, on_outcome: Callable[[Task, Outcome, int], None],
                     max_live: int, stop: Callable[[], bool]) -> None:
    """Run tasks with at most ``max_live`` in progress; outcomes are handled in completion order.

    Finished jobs report through a queue (O(1) per completion, unlike re-scanning the live set with
    ``asyncio.wait``), so the engine's own cost stays a small share of the client's.
    """
    pending, live = iter(tasks), 0
    finished: asyncio.Queue[tuple[Task, asyncio.Task]] = asyncio.Queue()
    while True:
        while live < max_live and not stop():
            task = next(pending, None)
            if task is None:
                break
            job = asyncio.ensure_future(evolver.evolve(task))
            job.add_done_callback(lambda j, t=task: finished.put_nowait((t, j)))
            live += 1
        if live == 0:
            return
        task, job = await finished.get()
        live -= 1
        on_outcome(task, job.result(), live)


def summarize(files: EvolveFiles) -> dict:
    """Counts per round and per operator, and the elimination reasons (what 02_dedup and diagnostics read)."""
    per_round: dict[int, Counter] = {}
    per_operator: dict[str, Counter] = {}
    for kind, records in (("kept", files.kept.values()), ("eliminated", files.eliminated.values())):
        for r in records:
            per_round.setdefault(r["round"], Counter())[kind] += 1
            per_operator.setdefault(r["operator"], Counter())[kind] += 1
    reasons = Counter(r.get("reason", "?") for r in files.eliminated.values())
    return {"per_round": {k: dict(v) for k, v in sorted(per_round.items())},
            "per_operator": {k: dict(v) for k, v in sorted(per_operator.items())},
            "reasons": dict(reasons.most_common())}


def fanout_tasks(parents: list[dict], k: int, cfg: RunConfig) -> list[Task]:
    """k sibling evolutions per parent, each with a different operator (ids ``<root>-f<round>-<op>``)."""
    from rleif_kit.operators import distinct_operators

    ev, operators, tasks = cfg.evol_instruct, operators_for(cfg.evol_instruct.domain), []
    for parent in parents:
        round_ = parent.get("round", 0) + 1
        root = parent.get("root_id", parent["id"])
        for op in distinct_operators(parent["id"], round_, operators, k, ev.evolve_up_ratio, seed=cfg.base.seed):
            tasks.append(Task(f"{parent['id']}-f{round_}-{op.name}", {**parent, "root_id": root}, round_, op))
    return tasks


async def run_fanout_async(cfg: RunConfig, out_path: Path, parents: list[dict], k: int, evolver: Any,
                           progress: bool = True) -> list[dict]:
    """Evolve each parent into k variants with distinct operators; every outcome (kept or eliminated,
    with ``sibling_group`` = the parent id) is appended to ``out_path``. Resumable like the rounds."""
    from tqdm.auto import tqdm

    done = {r["id"]: r for r in read_jsonl(out_path)}
    tasks = [t for t in fanout_tasks(parents, k, cfg) if t.id not in done]
    bar = tqdm(total=len(tasks), desc="fan-out", disable=not progress)
    with JsonlWriter(out_path, fsync_every=cfg.evol_instruct.checkpoint_every) as out:
        def on_outcome(task: Task, outcome: Outcome, in_flight: int) -> None:
            bar.update(1)
            if outcome.kind in ("kept", "eliminated"):
                record = {**outcome.record, "sibling_group": task.parent["id"], "kept": outcome.kind == "kept"}
                out.write(record)
                done[record["id"]] = record

        await _run_tasks(tasks, evolver, on_outcome, 64, lambda: False)
    bar.close()
    return list(done.values())


def run_fanout(cfg: RunConfig, out_path: Path, parents: list[dict], k: int, settings: Any = None,
               progress: bool = True) -> list[dict]:
    """Synchronous :func:`run_fanout_async` with the evolver of ``[evol_instruct].backend``."""
    from rleif_kit.llm import run_sync

    return run_sync(run_fanout_async(cfg, out_path, parents, k, make_evolver(cfg, settings), progress))


def _count_duplicate_ids(*paths: Path) -> int:
    ids = [r["id"] for p in paths for r in read_jsonl(p)]
    return len(ids) - len(set(ids))


async def run_evolve_async(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True,
                           evolver: Any = None) -> EvolveResult:
    """Evolve every seed lineage for ``rounds`` rounds, resuming from what the files already hold."""
    from tqdm.auto import tqdm

    ev = cfg.evol_instruct
    evolver = evolver or make_evolver(cfg, settings)
    operators = operators_for(ev.domain)
    files = EvolveFiles(paths, ev.checkpoint_every)
    lineages = {s["root_id"]: s for s in load_seeds(cfg, paths)}
    if ev.backend == "arith" and not all(s.get("problem") for s in lineages.values()):
        raise ValueError("[evol_instruct] backend = 'arith' needs arithmetic seeds: seeds = 'arith:N', or JSONL "
                         "records with a 'problem' (as a loop iteration's seeds.jsonl has)")
    backend = getattr(evolver, "backend", None)
    stopped = lambda: bool(backend is not None and getattr(backend, "stopped_reason", None))  # noqa: E731
    max_live = 2 * ev.concurrency if backend is not None else 64  # a little queue ahead of the semaphore
    bar = tqdm(total=len(lineages) * ev.rounds, desc="evolve", disable=not progress)
    try:
        for round_ in range(1, ev.rounds + 1):
            tasks = plan_round(lineages, round_, files, cfg, operators)
            bar.update(len(lineages) - len(tasks))

            def on_outcome(task: Task, outcome: Outcome, in_flight: int) -> None:
                if outcome.kind != "stopped":
                    files.write(outcome)
                if outcome.kind == "kept":
                    lineages[task.root_id] = outcome.record
                elif outcome.kind in ("failed", "stopped"):
                    lineages[task.root_id] = None  # this lineage waits for the next run
                bar.update(1)
                bar.set_postfix(kept=len(files.kept), eliminated=len(files.eliminated),
                                failed=sum(files.attempts.values()), in_flight=in_flight, refresh=False)

            await _run_tasks(tasks, evolver, on_outcome, max_live, stopped)
            if stopped():
                break
    finally:
        bar.close()
        files.close()
        if backend is not None and hasattr(backend, "aclose"):
            await backend.aclose()
    return _result(files, evolver, paths)


def _result(files: EvolveFiles, evolver: Any, paths: RunPaths) -> EvolveResult:
    backend = getattr(evolver, "backend", None)
    usage = backend.usage.to_dict() if backend is not None else {"requests": 0, "cost_usd": 0.0}
    stopped_reason = getattr(backend, "stopped_reason", None)
    usage.update(model=evolver.model, stopped_reason=stopped_reason)
    (paths.stage("01_evolve") / "usage.json").write_text(json.dumps(usage, indent=2) + "\n")
    summary = summarize(files)
    (paths.stage("01_evolve") / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    failed_now = [i for i, n in files.attempts.items() if i not in files.kept and i not in files.eliminated]
    return EvolveResult(kept=len(files.kept), eliminated=len(files.eliminated), failed=len(failed_now),
                        duplicate_ids=_count_duplicate_ids(files.evolved_path, files.eliminated_path),
                        stopped_reason=stopped_reason, usage=usage, per_round=summary["per_round"],
                        per_operator=summary["per_operator"], reasons=summary["reasons"])


def run_evolve(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> EvolveResult:
    """Synchronous entry point (works inside Jupyter's running event loop too)."""
    from rleif_kit.llm import run_sync

    return run_sync(run_evolve_async(cfg, paths, settings, progress))


def estimate_evolve(cfg: RunConfig, paths: RunPaths, settings: Any = None) -> dict:
    """Dry run: requests, tokens and cost of a full run, before anything is sent."""
    from rleif_kit.llm.openai_backend import estimate

    ev = cfg.evol_instruct
    seeds = list(load_seeds(cfg, paths))
    if ev.backend == "arith":
        return {"requests": 0, "prompt_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "seeds": len(seeds),
                "rounds": ev.rounds, "note": "the arith backend is programmatic: it sends no request"}
    templates = load_templates(cfg.resolve(ev.prompts_dir), ev.domain)
    per_call = 1 + int(ev.equality_judge and ev.backend == "openai") + int(ev.with_answers)
    requests = (_dry_request(templates, s, i) for s in seeds for i in range(ev.rounds * per_call))
    price = settings.price(settings.endpoint("evolve").name) if settings is not None else None
    out = estimate(requests, price, expected_output_tokens=min(ev.max_new_tokens, 256))
    out.update(seeds=len(seeds), rounds=ev.rounds, requests_per_evolution=per_call)
    return out


def _dry_request(templates: dict[str, str], seed: dict, i: int):
    from rleif_kit.llm import ChatRequest

    template = next(iter(templates.values()), "{instruction}")
    return ChatRequest(key=f"{seed['id']}#{i}",
                       messages=({"role": "user", "content": template.replace("{instruction}", seed["text"])},))


def main(argv: list[str] | None = None) -> None:
    """``python -m rleif_kit.evolve --params P [--settings S] [--set k=v] [--dry-run]`` (same as ``rleif evolve``)."""
    import argparse

    from rleif_kit.cli import main as cli_main

    parser = argparse.ArgumentParser(description="Run the Evol-Instruct stage without a notebook.")
    parser.add_argument("--params", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[])
    parser.add_argument("--settings")
    parser.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and cost; send nothing")
    args = parser.parse_args(argv)
    argv2 = ["evolve", args.params] + [x for o in args.overrides for x in ("--set", o)]
    argv2 += (["--settings", args.settings] if args.settings else []) + (["--dry-run"] if args.dry_run else [])
    raise SystemExit(cli_main(argv2))


if __name__ == "__main__":
    main()
