"""Stage 01: Evol-Instruct — evolve seed instructions up and down for ``[evol_instruct].rounds`` rounds.

Each round, every lineage (one per seed) gets one operator, drawn from its root id and the round, so a
rerun makes the same choices. The evolved text is checked (``evolve/elimination.py``); a failed evolution
goes to ``eliminated.jsonl`` with its reason and the lineage keeps its parent for the next round.
API failures go to ``failed.jsonl`` and are retried by the next run, up to ``retry_failed`` attempts.

Crash safety: every outcome is appended to its JSONL file as soon as it is known (flushed; fsynced
every ``checkpoint_every`` records). A rerun replays the files, skips every id already decided and
continues, so a run killed at any moment loses at most the requests in flight.

    python -m rleif_kit.evolve --params params/tiny-cpu.toml [--settings settings.json] [--dry-run]
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from rleif_kit.checks import stage_failures
from rleif_kit.checks.stage_failures import Failures, counts_against_item, failure_lines
from rleif_kit.core.config import RunConfig
from rleif_kit.core.exits import EXIT_STOPPED, REJECTED_PREFIX, rejected_error
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl, write_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_counts, plot_reasons, save_figure
from rleif_kit.core.progress import Bar
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stages import EVOLVE
from rleif_kit.core.tables import count_table
from rleif_kit.core.user_files import read_user_text
from rleif_kit.evolve.evolvers import Outcome, Task, WorldEvolver, child_record, make_evolver
from rleif_kit.evolve.lineages import elimination_table, evolve_example, lineage_table
from rleif_kit.evolve.operators import child_id, choose_operator, reweighted
from rleif_kit.llm.base import ChatRequest, merge_usage, run_sync
from rleif_kit.llm.openai_backend import estimate
from rleif_kit.llm.tasks import run_bounded
from rleif_kit.llm.usage import ledger_runs
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import Operator
from rleif_kit.worlds.data import load_seeds
from rleif_kit.worlds.intros import stage_intro

# The stage's public face: what its notebook, ``python -m rleif_kit.evolve`` and ``rleif evolve`` use. The lineage
# views (evolve/lineages.py), the seeds they start from (worlds/data.py), the counts table (core/tables.py) and the
# plots (core/plots.py) are defined there and offered here, so that the notebook reads one stage module.
__all__ = ["stage_intro", "EvolveResult", "run_evolve", "evolve_command", "estimate_evolve", "count_table",
           "plot_counts", "plot_reasons", "save_figure", "load_seeds", "lineage_table", "elimination_table",
           "evolve_example"]


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
    failures: dict = field(default_factory=dict)  # what 01_evolve/failures.json holds (checks/stage_failures.py)


# ---------------------------------------------------------------- what the records were made under

# [evol_instruct] keys that decide a record's text (rounds only extends the lineages; concurrency, caching,
# budgets and retries decide how, not what; the dedup keys are 02's)
RECORD_KEYS = ("evolve_up_ratio", "evolve_down_ratio", "temperature", "top_p", "max_new_tokens", "backend",
               "seeds", "max_seeds", "with_answers", "equality_judge", "hf_model", "prompts_dir", "defect_rate",
               "operator_weights")


def evolution_meta(cfg: RunConfig, evolver: Any) -> dict:
    """The config keys, seed, model and prompt texts that decide the records of 01_evolve."""
    ev, world = cfg.evol_instruct, world_for(cfg)
    prompts = {}
    if not isinstance(evolver, WorldEvolver):  # a programmatic evolver reads no template
        folder = cfg.resolve(ev.prompts_dir)
        drawn = {op.name for op in reweighted(world.operators, ev.operator_weights)}
        texts = {name: text for name, text in world.evol_templates(folder).items() if name in drawn}
        texts["equality"] = read_user_text(folder / "evol" / "equality.txt", kind="a prompt template")
        if ev.with_answers:
            texts["answer"] = world.answer_template(folder)
        prompts = {name: hashlib.sha256(text.encode()).hexdigest()[:16] for name, text in sorted(texts.items())}
    return {"evol_instruct": {k: getattr(ev, k) for k in RECORD_KEYS}, "world": world.name, "seed": cfg.base.seed,
            "model": getattr(evolver, "model", None), "prompts": prompts, "inputs": _input_fingerprints(cfg)}


def _input_fingerprints(cfg: RunConfig) -> dict:
    """What the files named by path held: a seeds file rewritten in place (``rleif data`` with new inputs: same
    ids, new text) or a local ``hf_model`` retrained in place must make the records stale, as a new path does.
    Seeds: sha256 of the lines read (the first ``max_seeds``); a model directory: its files' names, sizes and
    mtimes (cheap: no weights are read). None where nothing is on disk (generated seeds, a hub id)."""
    ev, seeds, model = cfg.evol_instruct, None, None
    path = cfg.resolve(ev.seeds)
    if path.is_file():
        digest, n = hashlib.sha256(), 0
        with open(path, "rb") as f:
            for line in f:
                n += bool(line.strip())
                if ev.max_seeds and n > ev.max_seeds:
                    break
                digest.update(line)
        seeds = digest.hexdigest()[:16]
    folder = cfg.resolve(ev.hf_model) if ev.backend == "hf" and ev.hf_model else None
    if folder is not None and folder.is_dir():
        model = _fingerprint(folder)
    return {"seeds": seeds, "hf_model": model}


def _fingerprint(folder: Path, head: int = 1 << 16) -> str:
    """A local model folder's files by name, size and the hash of their first 64 KiB: a retrained model changes it
    (its weights' bytes), a copy does not (``cp -r`` changes mtimes, which are left out)."""
    digest = hashlib.sha256()
    for f in sorted(p for p in folder.iterdir() if p.is_file()):
        with open(f, "rb") as handle:
            digest.update(f"{f.name}\0{f.stat().st_size}\0".encode() + hashlib.sha256(handle.read(head)).digest())
    return digest.hexdigest()[:16]


def _flat(meta: dict) -> dict:
    """``{"evol_instruct": {"temperature": 0.9}}`` -> ``{"evol_instruct.temperature": 0.9}`` (one level)."""
    out = {}
    for key, value in meta.items():
        if isinstance(value, dict):
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def claim_records(paths: RunPaths, meta: dict) -> str | None:
    """Make 01_evolve's records safe to resume under ``meta``: records made under another one are moved aside
    (``*.stale.jsonl``, as evaluation does) and evolution starts over; returns the note it prints, else None.
    Records without a meta (made before it was kept) are kept: nothing says they are stale; so are the keys an
    older meta did not keep yet (``inputs``: the records of a run begun before it was kept are not thrown away)."""
    old = json.loads(paths.evolve_meta.read_text()) if paths.evolve_meta.exists() else None
    note = None
    files = [p for p in (paths.evolved, paths.eliminated, paths.evolve_failed) if p.exists()]
    before, now = _flat(old or {}), _flat(meta)
    if old is not None and "inputs" not in old:  # a meta from before the inputs were kept: nothing says they changed
        now = {k: v for k, v in now.items() if not k.startswith("inputs.")}
    changed = sorted(k for k in set(before) | set(now) if before.get(k) != now.get(k))
    if old is not None and changed and files:
        for path in files:
            path.replace(_aside(path, "stale"))
        note = (f"{paths.rel(paths.evolve_meta.parent)}: records were made with other {', '.join(changed)}; moved "
                "to *.stale.jsonl, evolving again")
        print(note, flush=True)
    paths.evolve_meta.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(paths.evolve_meta, meta)
    return note


def _aside(path: Path, why: str) -> Path:
    """A free ``<name>.<why>.jsonl`` (``.<why>-2.jsonl``, ...) beside ``path``: an earlier move's records are kept."""
    aside, n = path.with_suffix(f".{why}.jsonl"), 1
    while aside.exists():
        n += 1
        aside = path.with_suffix(f".{why}-{n}.jsonl")
    return aside


def set_aside_surplus(paths: RunPaths, rounds: int, roots: set[str]) -> str | None:
    """Records the config no longer asks for — of a round past ``rounds``, or of a lineage whose seed is not among
    ``roots`` (fewer rounds or fewer seeds than were evolved) — moved to ``*.surplus.jsonl``, as
    :func:`claim_records` moves stale ones: later stages must not read them. Returns the note it prints, else
    None. The surplus file is written before the records leave their own, so a crash between loses nothing."""
    moved, why = 0, set()
    for path in (paths.evolved, paths.eliminated, paths.evolve_failed):
        if not path.exists():
            continue
        records = _records(path, paths)
        late = {id(r) for r in records if r["round"] > rounds}
        orphan = {id(r) for r in records if "root_id" in r and r["root_id"] not in roots}
        if not late and not orphan:
            continue
        surplus = late | orphan
        why |= ({"rounds"} if late else set()) | ({"seeds"} if orphan - late else set())
        write_jsonl(_aside(path, "surplus"), [r for r in records if id(r) in surplus])
        write_jsonl(path, [r for r in records if id(r) not in surplus])
        moved += len(surplus)
    if not moved:
        return None
    causes = " and ".join(x for x in (f"a round past [evol_instruct] rounds = {rounds}" if "rounds" in why else "",
                                      "a seed no longer among the seeds" if "seeds" in why else "") if x)
    note = (f"{paths.rel(paths.evolve_meta.parent)}: {moved} records of {causes} moved to *.surplus.jsonl "
            "(kept aside, not used by later stages)")
    print(note, flush=True)
    return note


# ---------------------------------------------------------------- the run


class EvolveFiles:
    """The stage's append-only files, and what a previous (possibly killed) run already decided."""

    def __init__(self, paths: RunPaths, fsync_every: int):
        self.evolved_path, self.eliminated_path, self.failed_path = paths.evolved, paths.eliminated, paths.evolve_failed
        self.kept = {r["id"]: r for r in _records(self.evolved_path, paths)}
        self.eliminated = {r["id"]: r for r in _records(self.eliminated_path, paths)}
        self.attempts: Counter = Counter()  # failures that used up one of an id's retry_failed attempts
        self.last_error: dict[str, str] = {}
        for r in _records(self.failed_path, paths):
            self._count_failure(r)
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
            self._count_failure(outcome.record)

    def _count_failure(self, record: dict) -> None:
        # an unreachable or failing endpoint is not the request's fault: every rerun retries it
        self.last_error[record["id"]] = str(record.get("error"))
        self.attempts[record["id"]] += counts_against_item(record.get("error"))

    def failures(self) -> tuple[Failures, Failures]:
        """(the evolutions still failed, which a rerun retries; those given up after ``retry_failed`` attempts of
        errors of their own, which no rerun asks again), each against all asked for."""
        pending = {i: e for i, e in self.last_error.items() if i not in self.kept and i not in self.eliminated}
        given_up = {i: self.last_error.get(i, "api error") for i, r in self.eliminated.items()
                    if r.get("reason") == "api_error"}
        total = len(self.kept) + len(self.eliminated) + len(pending)
        return (Failures("evolutions", total, pending),
                Failures("evolutions (given up after their attempts)", total, given_up))

    def close(self) -> None:
        for w in self.writers.values():
            w.close()


def _records(path: Path, paths: RunPaths) -> list[dict]:
    """A record file of this stage, each record checked for what resuming needs: a string ``id`` and an integer
    ``round`` (a hand-edited file that lost them fails here with its line, not deep in the run)."""
    out = []
    for n, r in enumerate(read_jsonl(path), 1):
        if not isinstance(r.get("id"), str) or not isinstance(r.get("round"), int) or isinstance(r["round"], bool):
            raise ValueError(f"{paths.rel(path)}: record {n} has no string 'id' and integer 'round' ({sorted(r)}): "
                             f"the kit writes this file; restore it, or delete {paths.rel(path.parent)} to evolve "
                             "again")
        out.append(r)
    return out


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
            files.write(Outcome("eliminated", {**child_record(Task(cid, current, round_, op), "", "-"),
                                               "reason": "api_error"}))
        else:
            tasks.append(Task(cid, current, round_, op))
    return tasks


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


def _count_duplicate_ids(*paths: Path) -> int:
    ids = [r["id"] for p in paths for r in read_jsonl(p)]
    return len(ids) - len(set(ids))


async def run_evolve_async(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True,
                           evolver: Any = None) -> EvolveResult:
    """Evolve every seed lineage for ``rounds`` rounds, resuming from what the files already hold."""
    ev = cfg.evol_instruct
    evolver = evolver or make_evolver(cfg, settings, ledger=paths.evolve_usage_ledger)
    world = world_for(cfg)
    operators = reweighted(world.operators, ev.operator_weights)
    claim_records(paths, json.loads(json.dumps(evolution_meta(cfg, evolver))))  # stale records moved aside
    lineages = {s["root_id"]: s for s in load_seeds(cfg, paths)}
    set_aside_surplus(paths, ev.rounds, set(lineages))  # and those of fewer rounds or seeds than were evolved
    files = EvolveFiles(paths, ev.checkpoint_every)
    if isinstance(evolver, WorldEvolver):
        world.check_seeds(list(lineages.values()))
    backend = getattr(evolver, "backend", None)
    stopped = lambda: bool(backend is not None and getattr(backend, "stopped_reason", None))  # noqa: E731
    max_live = 2 * ev.concurrency if backend is not None else 64  # a little queue ahead of the semaphore
    bar = Bar(len(lineages) * ev.rounds, "evolve", EVOLVE, disable=not progress)  # and progress lines
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
                                failed=len(files.last_error), in_flight=in_flight, refresh=False)

            await run_bounded(tasks, evolver.evolve, on_outcome, max_live, stopped)
            if stopped():
                break
    finally:
        bar.close()
        files.close()
        if backend is not None and hasattr(backend, "aclose"):
            await backend.aclose()
    result = _result(files, evolver, paths)
    # past [diagnostics] evolve_failure_fail, or all failed: the stage is stopped (no done marker, exit 4)
    pending, given_up = files.failures()
    result.failures = stage_failures.write(paths.stage_dir(EVOLVE), [pending, given_up],
                                           cfg.diagnostics.evolve_failure_fail)
    message = stage_failures.stop_message(result.failures, given_up.what, (
        f"each failed {ev.retry_failed} times on its own account ([evol_instruct] retry_failed) and is not asked "
        f"again: fix the cause (the server's words above), then delete {paths.rel(paths.stage_dir(EVOLVE))} "
        "to evolve again (a changed [evol_instruct] key does so too)"))
    if message and not stopped():  # no rerun can mend these: the stage fails
        raise ValueError(message)
    return result


def _result(files: EvolveFiles, evolver: Any, paths: RunPaths) -> EvolveResult:
    backend = getattr(evolver, "backend", None)
    usage = backend.usage.to_dict() if backend is not None else {"requests": 0, "cost_usd": 0.0}
    stopped_reason = getattr(backend, "stopped_reason", None)
    usage.update(model=evolver.model, stopped_reason=stopped_reason,
                 finished=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    ledger = getattr(backend, "ledger", None)  # usage.jsonl: every request as it was sent, killed invocations too
    if ledger is not None:
        usage["inv"] = ledger.inv
    runs = ledger_runs(paths.evolve_usage_ledger) if ledger is not None or \
        paths.evolve_usage_ledger.exists() else None
    merged = merge_usage(_previous_usage(paths.evolve_usage), usage, runs)
    write_json_atomic(paths.evolve_usage, merged)
    usage["total"] = merged["total"]  # what every invocation of this stage sent and cost, as the ledger saw it
    summary = summarize(files)
    write_json_atomic(paths.evolve_summary, summary)
    failed_now = [i for i, n in files.attempts.items() if i not in files.kept and i not in files.eliminated]
    return EvolveResult(kept=len(files.kept), eliminated=len(files.eliminated), failed=len(failed_now),
                        duplicate_ids=_count_duplicate_ids(files.evolved_path, files.eliminated_path),
                        stopped_reason=stopped_reason, usage=usage, per_round=summary["per_round"],
                        per_operator=summary["per_operator"], reasons=summary["reasons"])


def _previous_usage(path: Path) -> dict | None:
    """The usage.json of earlier invocations; None (with a note) when it is unreadable: the totals restart."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            return data
    except (ValueError, OSError):
        pass
    print(f"note: {path} is unreadable; usage totals restart from this invocation")
    return None


def run_evolve(cfg: RunConfig, paths: RunPaths, settings: Any = None, progress: bool = True) -> EvolveResult:
    """Synchronous entry point (works inside Jupyter's running event loop too). Raises EndpointRejected, after
    writing what was done, when the endpoint refused the requests (401 / 403 / 404): a run must stop there, not
    go on to 02 with nothing kept."""
    result = run_sync(run_evolve_async(cfg, paths, settings, progress))
    if result.stopped_reason and result.stopped_reason.startswith(REJECTED_PREFIX):
        raise rejected_error(result.stopped_reason)
    return result


def estimate_evolve(cfg: RunConfig, paths: RunPaths, settings: Any = None) -> dict:
    """Dry run: requests, tokens and cost of a full run, before anything is sent."""
    ev = cfg.evol_instruct
    seeds = list(load_seeds(cfg, paths))
    world = world_for(cfg)
    if world.evolves_offline(cfg):
        return {"requests": 0, "prompt_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "seeds": len(seeds),
                "rounds": ev.rounds, "note": f"the {world.name} world's evolver is programmatic: it sends no request"}
    templates = world.evol_templates(cfg.resolve(ev.prompts_dir))
    per_call = 1 + int(ev.equality_judge and ev.backend == "openai") + int(ev.with_answers)
    requests = (_dry_request(templates, s, i) for s in seeds for i in range(ev.rounds * per_call))
    price = settings.price(settings.endpoint("evolve").name) if settings is not None else None
    out = estimate(requests, price, expected_output_tokens=min(ev.max_new_tokens, 256))
    out.update(seeds=len(seeds), rounds=ev.rounds, requests_per_evolution=per_call)
    return out


def _dry_request(templates: dict[str, str], seed: dict, i: int):
    template = next(iter(templates.values()), "{instruction}")
    return ChatRequest(key=f"{seed['id']}#{i}",
                       messages=({"role": "user", "content": template.replace("{instruction}", seed["text"])},))


def evolve_command(params: str, overrides: list[str], settings_path: str | None, dry_run: bool) -> int:
    """``rleif evolve`` and ``python -m rleif_kit.evolve``: the stage alone, or its cost (``dry_run``)."""
    cfg, paths = setup(params, overrides, stage=EVOLVE)
    settings = load_settings(settings_path) if settings_path else None
    if dry_run:
        print(json.dumps(estimate_evolve(cfg, paths, settings), indent=2))
        return 0
    result = run_evolve(cfg, paths, settings)  # EndpointRejected: the callers exit EXIT_REJECTED with its line
    print(f"kept {result.kept}, eliminated {result.eliminated}, failed {result.failed}"
          + (f"; stopped: {result.stopped_reason} (raise the budget in [evol_instruct], then rerun to continue)"
             if result.stopped_reason else ""))
    if result.failures.get("status") == "stopped":
        print(failure_lines(result.failures, "rerun the same command: it retries exactly the failed ones"))
    return EXIT_STOPPED if result.stopped_reason or result.failures.get("status") == "stopped" else 0
