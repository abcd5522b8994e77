"""Reward-model labels from a judge model behind an OpenAI-compatible endpoint.

* :func:`judge_irm_rankings` asks ``models.irm_judge`` to rank each sibling set of evolved variants
  (from ``evolve.fanout.run_fanout``) and turns every ranking into preference pairs for the IRM.
* :func:`judge_prm_labels` asks ``models.prm_judge`` to mark each step of a solution correct or not,
  for the PRM.

Why it is built this way:

* The calls go through the evolution engine's machinery (``OpenAIBackend``: concurrency, client
  retries, usage and cost, ``ResponseCache``, ``max_requests`` / ``max_cost``; ``llm/tasks.run_bounded``:
  bounded jobs handled in completion order), configured by the same ``[evol_instruct]`` endpoint
  knobs, so there is one HTTP client to trust and one set of budget rules.
* A wrong label is worse than no label: an answer the strict parsers in ``judges.py`` refuse is
  asked again as a fresh request (a new ``sample_index``, so the cache cannot hand back the same
  bad answer, at a non-zero temperature), and after ``max_attempts`` it is recorded as failed.
  Nothing is ever guessed.
* Every decided item is appended to ``out_path`` (JSONL, crash-safe) as soon as it is known. A
  rerun skips decided items, so a crashed or budget-stopped run resumes where it stopped. API
  errors (what is left after the client's own retries) are retried by later runs, up to
  ``[evol_instruct].retry_failed`` attempts. A budget stop writes nothing for the items it cut.
* ``<out>.report.json`` says what the run cost and what came of it (:class:`JudgeReport`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Sequence

from rleif_kit.checks import stage_failures
from rleif_kit.checks.stage_failures import Failures, counts_against_item
from rleif_kit.core.config import RunConfig
from rleif_kit.core.exits import REJECTED_PREFIX, StageIncomplete, rejected_error
from rleif_kit.core.jsonl import JsonlWriter, read_jsonl
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.progress import Bar
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.llm.base import ChatRequest, cut_off, run_sync
from rleif_kit.llm.endpoint import make_llm_backend
from rleif_kit.llm.tasks import run_bounded
from rleif_kit.rewards import judges
from rleif_kit.rewards.irm_data import balance_pairs, ranking_to_pairs, sibling_pair
from rleif_kit.worlds.prompts import math_prompt

__all__ = ["JudgeReport", "judge_irm_rankings", "judge_prm_labels", "ranking_pairs", "format_steps",
           "report_path", "make_judge_backend", "MAX_ATTEMPTS"]

MAX_ATTEMPTS = 3  # requests per item before a malformed answer is recorded as failed
RETRY_TEMPERATURE = 0.7  # a re-ask at temperature 0 would usually repeat the same malformed answer
MAX_TOKENS = 512
STEP_MARK = re.compile(r"^\s*step\s*\d+\s*[:.)]\s*", re.I)


@dataclass
class JudgeReport:
    """What a labelling run cost and what came of it; written next to the output as ``<out>.report.json``.

    ``ok`` / ``failed`` / ``pending`` cover every item asked for, including those decided by an
    earlier run; ``usage`` (requests, tokens, ``cost_usd``, None when unpriced) is this run's only.
    """

    role: str
    model: str
    total: int = 0
    resumed: int = 0  # already decided before this run: not asked again
    ok: int = 0
    failed: dict = field(default_factory=dict)  # reason -> count ("unparseable", "api: http 500 ...")
    pending: int = 0  # undecided (budget stop, API errors to retry): rerun to finish
    retried: int = 0  # items decided this run that needed more than one request
    stopped_reason: str | None = None
    usage: dict = field(default_factory=dict)


@dataclass(frozen=True)
class _Item:
    id: str
    prompt: str | None  # None: nothing to ask (a solution without steps), recorded failed at once
    parse: Callable[[str], Any]  # judge answer -> label, or None when it is malformed
    meta: dict


def report_path(out_path: str | Path) -> Path:
    return Path(out_path).with_suffix(".report.json")


def make_judge_backend(cfg: RunConfig, settings: Any, role: str, out_path: str | Path) -> Any:
    """``OpenAIBackend`` for ``role``, with the ``[evol_instruct]`` concurrency, cache and caps.

    The cache lives next to the output (``<out>.cache.sqlite``). A missing role raises the
    settings' own error, which names the ``models.<role>`` key to add.
    """
    if settings is None:
        raise ValueError(f"judge labelling needs a settings.json with models.{role} (pass settings=...)")
    return make_llm_backend(cfg, settings, role, cache_path=Path(out_path).with_suffix(".cache.sqlite"),
                            prompt_format=partial(math_prompt, cot=False))  # on /v1/completions: Alpaca


def _fill(template: str, **values: str) -> str:
    """One-pass placeholder substitution: braces inside the values (code, sets) are left alone."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# ---------------------------------------------------------------- the shared engine


async def _judge_async(cfg: RunConfig, backend: Any, role: str, items: list[_Item], out_path: Path,
                       max_attempts: int, progress: bool) -> tuple[dict[str, dict], JudgeReport]:

    ids = [it.id for it in items]
    repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
    if repeated:
        raise ValueError(f"{role}: item ids (sibling groups) must be unique; repeated: {repeated[:5]}")
    # The last record of an id wins; it only counts when it answered the same prompt (same texts).
    latest, api_errors = {}, Counter()
    for r in read_jsonl(out_path):  # read_jsonl skips a torn last line; JsonlWriter cuts it off
        latest[r["id"]] = r
        api_errors[r["id"]] += r["status"] == "api_error" and counts_against_item(r.get("reason"))
    shas = {it.id: _sha(it.prompt or "") for it in items}

    def final(r: dict | None, i: str) -> bool:  # decided for good, and about the prompt asked now
        return r is not None and r["status"] in ("ok", "failed") and r.get("prompt_sha") == shas[i]

    todo = [it for it in items if not final(latest.get(it.id), it.id)]
    report = JudgeReport(role=role, model=backend.model, total=len(items), resumed=len(items) - len(todo))

    async def judge(item: _Item) -> dict | None:
        if item.prompt is None:
            return {"status": "failed", "reason": "no_steps", "attempts": 0}
        answer = None
        for attempt in range(max_attempts):
            result = await backend.acomplete(ChatRequest(
                key=item.id, messages=({"role": "user", "content": item.prompt},), max_tokens=MAX_TOKENS,
                temperature=0.0 if attempt == 0 else RETRY_TEMPERATURE, sample_index=attempt))
            if not result.ok:
                if backend.stopped_reason or (result.error or "").startswith("budget"):
                    return None  # a cap or a rejected endpoint: not this item's fault; the next run resumes it
                # the endpoint's own failures (connection, timeout, 5xx) are retried by every rerun
                last = counts_against_item(result.error) and api_errors[item.id] + 1 >= cfg.evol_instruct.retry_failed
                return {"status": "failed" if last else "api_error", "reason": f"api: {result.error}",
                        "attempts": attempt + 1}
            answer, label = result.text, None if cut_off(result) else item.parse(result.text)  # cut: ask again
            if label is not None:
                return {"status": "ok", "label": label, "attempts": attempt + 1}
        return {"status": "failed", "reason": "unparseable", "attempts": max_attempts, "answer": answer[:2000]}

    bar = Bar(len(todo), f"judge ({role})", REWARD_MODELS, disable=not progress)
    try:
        with JsonlWriter(out_path, fsync_every=cfg.evol_instruct.checkpoint_every) as out:
            def on_outcome(item: _Item, outcome: dict | None, in_flight: int) -> None:
                bar.update(1)
                if outcome is None:
                    return
                record = {"id": item.id, "prompt_sha": shas[item.id], "model": backend.model, **item.meta, **outcome}
                out.write(record)
                latest[item.id] = record
                report.retried += outcome["attempts"] > 1

            await run_bounded(todo, judge, on_outcome, 2 * cfg.evol_instruct.concurrency,
                              lambda: backend.stopped_reason is not None)
    finally:
        bar.close()
        await backend.aclose()
        if backend.cache is not None:  # this backend was made for this call only
            backend.cache.close()
    decided = {i: latest[i] for i in ids if final(latest.get(i), i)}
    report.ok = sum(r["status"] == "ok" for r in decided.values())
    report.failed = dict(Counter(r["reason"] for r in decided.values() if r["status"] == "failed").most_common())
    report.pending = len(items) - len(decided)
    report.stopped_reason, report.usage = backend.stopped_reason, backend.usage.to_dict()
    report_path(out_path).write_text(json.dumps(asdict(report), indent=2) + "\n", encoding="utf-8")
    return decided, report


def _judge(cfg: RunConfig, settings: Any, role: str, items: list[_Item], out_path: str | Path,
           max_attempts: int, progress: bool) -> dict[str, dict]:
    """Decided records by id (ok and failed); also writes the report."""
    out_path = Path(out_path)
    if max_attempts < 1:
        raise ValueError(f"max_attempts must be >= 1, got {max_attempts}")
    backend = make_judge_backend(cfg, settings, role, out_path)  # fails before anything is asked
    decided, report = run_sync(_judge_async(cfg, backend, role, items, out_path, max_attempts, progress))
    if report.stopped_reason and report.stopped_reason.startswith(REJECTED_PREFIX):
        raise rejected_error(f"{role}: {report.stopped_reason}")  # 04 stops here, not with a model of no labels
    _stop_on_failures(cfg, role, items, out_path, decided)
    if report.stopped_reason:  # a budget: the labels not asked yet wait for the next run, 04 trains on none of it
        raise StageIncomplete(f"{role}: stopped with {report.pending} of {report.total} labels not asked "
                              f"({report.stopped_reason}): raise the budget in [evol_instruct], then rerun to continue")
    return decided


def _stop_on_failures(cfg: RunConfig, role: str, items: list[_Item], out_path: Path, decided: dict) -> None:
    """Count the labels that failed (to retry, or for good) into ``04_reward_models/failures.json``; past
    ``[diagnostics] judge_failure_fail`` (or all failed) stop 04 before it trains on what is left: exit 4 when a
    rerun can retry them, a plain error when they failed for good (the judge's answers are unreadable)."""
    latest = {r["id"]: r for r in read_jsonl(out_path)}
    asked = [it for it in items if it.prompt is not None]  # a solution without steps is not a request
    retry = {it.id: str(latest[it.id].get("reason")) for it in asked
             if it.id not in decided and it.id in latest and latest[it.id]["status"] == "api_error"}
    final = {i: str(r.get("reason")) + (f": {r['answer'][:120]!r}" if r.get("answer") else "")
             for i, r in decided.items() if r["status"] == "failed" and r["reason"] != "no_steps"}
    failures = Failures(f"{role} labels", len(asked), {**final, **retry})
    record = stage_failures.write(RunPaths(cfg.output_dir).stage_dir(REWARD_MODELS), failures,
                                  cfg.diagnostics.judge_failure_fail)
    action = ("fix the cause, then rerun: the failed labels are asked again" if retry else
              f"they failed for good and a rerun does not ask them again: check models.{role} in settings.json and "
              f"its prompt template, then delete {out_path} (every item is asked again), or raise [diagnostics] "
              "judge_failure_fail to train on the rest")
    message = stage_failures.stop_message(record, failures.what, action)
    if message:
        raise (StageIncomplete if retry else ValueError)(f"{role}: {message}")


# ---------------------------------------------------------------- IRM: rankings of sibling sets


def ranking_pairs(siblings: Sequence[dict], ranking: Sequence[str]) -> list[dict]:
    """Pairs of one ranked sibling set, shaped like ``irm_data.pairs_from_scores``: k give k(k-1)/2."""
    by_id = {r["id"]: r for r in siblings}
    return [sibling_pair(by_id[c], by_id[r]) for c, r in ranking_to_pairs(ranking)]


def judge_irm_rankings(cfg: RunConfig, settings: Any, groups: Sequence[Sequence[dict]], out_path: str | Path,
                       *, progress: bool = True, max_attempts: int = MAX_ATTEMPTS) -> list[dict]:
    """Rank every sibling set with ``models.irm_judge``; its preference pairs, deduplicated and balanced.

    Variants are shown in id order (stable prompts, so the cache and resume recognise them).
    A set of fewer than two variants has nothing to rank and is skipped; failed sets give no pair.
    """
    items, sets = [], {}
    for group in groups:
        siblings = sorted(group, key=lambda r: r["id"])
        if len(siblings) < 2:
            continue
        gid, ids = str(siblings[0]["sibling_group"]), [r["id"] for r in siblings]
        prompt = _fill(judges.IRM_JUDGE_PROMPT, k=str(len(ids)),
                       variants=judges.format_variants([r["text"] for r in siblings]))
        items.append(_Item(gid, prompt, lambda text, ids=ids: judges.parse_ranking(text, ids), {"ids": ids}))
        sets[gid] = siblings
    decided = _judge(cfg, settings, "irm_judge", items, out_path, max_attempts, progress)
    pairs = [p for it in items if decided.get(it.id, {}).get("status") == "ok"
             for p in ranking_pairs(sets[it.id], decided[it.id]["label"])]
    return balance_pairs(pairs, key="operator", seed=cfg.base.seed)


# ---------------------------------------------------------------- PRM: per-step verdicts


def format_steps(steps: Sequence[str]) -> str:
    """'Step 1: ...' lines, the numbering the prompt and ``parse_step_labels`` use (old markers dropped)."""
    return "\n".join(f"Step {i}: {STEP_MARK.sub('', s.strip(), count=1)}" for i, s in enumerate(steps, start=1))


def judge_prm_labels(cfg: RunConfig, settings: Any, items: Sequence[dict], out_path: str | Path,
                     *, progress: bool = True, max_attempts: int = MAX_ATTEMPTS) -> list[dict]:
    """Per-step verdicts from ``models.prm_judge``: ``[{"id", "question", "solution", "labels"}]``.

    Only judged solutions are returned (input order); a solution without steps is recorded failed
    ("no_steps") without a request, since one guessed step would be a wrong label.
    """
    jobs = []
    for it in items:
        n = len(it["steps"])
        prompt = _fill(judges.PRM_JUDGE_PROMPT, question=it["question"].strip(), n_steps=str(n),
                       solution=format_steps(it["steps"])) if n else None
        jobs.append(_Item(str(it["id"]), prompt, lambda text, n=n: judges.parse_step_labels(text, n), {"n_steps": n}))
    decided = _judge(cfg, settings, "prm_judge", jobs, out_path, max_attempts, progress)
    return [{"id": it["id"], "question": it["question"], "solution": it["solution"],
             "labels": decided[str(it["id"])]["label"]}
            for it in items if decided.get(str(it["id"]), {}).get("status") == "ok"]
