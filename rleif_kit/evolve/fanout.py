"""The IRM's sibling sets: each parent instruction evolved k times with k distinct operators.

Stage 04 ranks these siblings; the evolutions go through the same evolvers and elimination as stage 01.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.exits import REJECTED_PREFIX, rejected_error
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl
from rleif_kit.core.progress import Bar
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.evolve.evolvers import Outcome, Task, make_evolver
from rleif_kit.evolve.operators import distinct_operators, reweighted
from rleif_kit.llm.base import merge_usage, run_sync
from rleif_kit.llm.tasks import run_bounded
from rleif_kit.llm.usage import ledger_path, ledger_runs
from rleif_kit.worlds import world_for


def fanout_tasks(parents: list[dict], k: int, cfg: RunConfig) -> list[Task]:
    """k sibling evolutions per parent, each with a different operator (ids ``<root>-f<round>-<op>``)."""
    ev, tasks = cfg.evol_instruct, []
    operators = reweighted(world_for(cfg).operators, ev.operator_weights)
    for parent in parents:
        round_ = parent.get("round", 0) + 1
        root = parent.get("root_id", parent["id"])
        for op in distinct_operators(parent["id"], round_, operators, k, ev.evolve_up_ratio, seed=cfg.base.seed):
            tasks.append(Task(f"{parent['id']}-f{round_}-{op.name}", {**parent, "root_id": root}, round_, op))
    return tasks


async def run_fanout_async(cfg: RunConfig, out_path: Path, parents: list[dict], k: int, evolver: Any,
                           progress: bool = True, failed: dict[str, str] | None = None) -> list[dict]:
    """Evolve each parent into k variants with distinct operators; every outcome (kept or eliminated,
    with ``sibling_group`` = the parent id) is appended to ``out_path``. Resumable like the rounds. Through an
    endpoint, what it cost goes to ``<out>.usage.json`` (invocations and their total, as 01's ``usage.json``),
    rebuilt from its own ledger ``<out>.usage.jsonl``: 01's usage counts 01's requests only. ``failed`` gets each
    sibling whose request failed (id -> error; a rerun asks it again); an endpoint that rejects the requests stops
    the fan-out and raises :class:`EndpointRejected`."""
    done = {r["id"]: r for r in read_jsonl(out_path)}
    backend = getattr(evolver, "backend", None)
    stopped = lambda: bool(getattr(backend, "stopped_reason", None))  # noqa: E731 - a budget or a rejection
    every = fanout_tasks(parents, k, cfg)
    tasks = [t for t in every if t.id not in done]
    bar = Bar(len(tasks), "fan-out", REWARD_MODELS, disable=not progress)  # 04's IRM sibling sets
    with JsonlWriter(out_path, fsync_every=cfg.evol_instruct.checkpoint_every) as out:
        def on_outcome(task: Task, outcome: Outcome, in_flight: int) -> None:
            bar.update(1)
            if outcome.kind in ("kept", "eliminated"):
                record = {**outcome.record, "sibling_group": task.parent["id"], "kept": outcome.kind == "kept"}
                out.write(record)
                done[record["id"]] = record
            elif failed is not None and outcome.kind == "failed":
                failed[task.id] = str(outcome.record.get("error"))

        await run_bounded(tasks, evolver.evolve, on_outcome, 64, stopped)
    bar.close()
    if backend is not None and getattr(backend, "usage", None) is not None:  # what the fan-out cost, like 01's
        usage_path = fanout_usage(out_path)
        previous = json.loads(usage_path.read_text()) if usage_path.exists() else None
        now = {**backend.usage.to_dict(), "model": evolver.model}
        ledger = getattr(backend, "ledger", None)
        if ledger is not None:
            now["inv"] = ledger.inv
        runs = ledger_runs(ledger.path) if ledger is not None else None
        write_json_atomic(usage_path, merge_usage(previous, now, runs))
    reason = getattr(backend, "stopped_reason", None)
    if reason and reason.startswith(REJECTED_PREFIX):  # 04 stops here, not with sibling sets of nothing
        raise rejected_error(f"fan-out: {reason}")
    # in task order, not in the order the replies arrived (or an earlier run wrote them): the IRM's pairs, its
    # split and its training order follow this list, so an endpoint's timing must not move them
    order = {t.id: i for i, t in enumerate(every)}
    return sorted(done.values(), key=lambda r: (order.get(r["id"], len(order)), r["id"]))


def fanout_usage(out_path: Path) -> Path:
    """``<out>.usage.json`` beside the fan-out's records (its ledger: ``usage.ledger_path`` of it)."""
    return out_path.with_suffix(".usage.json")


def run_fanout(cfg: RunConfig, out_path: Path, parents: list[dict], k: int, settings: Any = None,
               progress: bool = True, failed: dict[str, str] | None = None) -> list[dict]:
    """Synchronous :func:`run_fanout_async` with the evolver of ``[evol_instruct].backend``, its requests in the
    fan-out's own usage ledger."""
    evolver = make_evolver(cfg, settings, ledger=ledger_path(fanout_usage(out_path)))

    async def run_and_close() -> list[dict]:
        try:
            return await run_fanout_async(cfg, out_path, parents, k, evolver, progress, failed)
        finally:  # its HTTP client inside this event loop, its ledger fsynced
            backend = getattr(evolver, "backend", None)
            if backend is not None and hasattr(backend, "aclose"):
                await backend.aclose()

    return run_sync(run_and_close())
