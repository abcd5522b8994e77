"""The evolvers behind Evol-Instruct: how one evolution task becomes an outcome.

``WorldEvolver`` asks the world's own programmatic evolver (the arithmetic world edits its problems
offline, with injected defects); ``LLMEvolver`` goes through a chat backend — the world's operator template,
evolved text, elimination checks, an optional LLM equality judge and an optional answer in the world's answer
template. ``make_evolver`` picks one by ``[evol_instruct].backend`` with a plain ``if``.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rleif_kit.core.config import RunConfig
from rleif_kit.core.user_files import read_user_text
from rleif_kit.evolve.elimination import (
    answer_elimination_reason,
    clean_evolved_text,
    elimination_reason,
    parse_equality,
)
from rleif_kit.evolve.operators import seeded_rng
from rleif_kit.llm.base import ChatRequest, cut_off, cut_off_reason
from rleif_kit.llm.endpoint import make_llm_backend
from rleif_kit.llm.hf_backend import HFBackend
from rleif_kit.models.loading import load_causal_lm, load_tokenizer
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import Operator
from rleif_kit.worlds.prompts import math_prompt


@dataclass(frozen=True)
class Task:
    """One evolution to make: ``parent`` evolved by ``operator`` into record ``id``."""

    id: str
    parent: dict
    round: int
    operator: Operator

    @property
    def root_id(self) -> str:
        return self.parent.get("root_id", self.parent["id"])


@dataclass(frozen=True)
class Outcome:
    kind: str  # "kept", "eliminated", "failed" or "stopped" (a budget cap: not recorded, resumed next run)
    record: dict


class Vetting:
    """The world's check of a kept evolution with its answer (``World.vet_evolved``: the code world runs the task's
    tests against its reference answer in the sandbox), run off the event loop, a few at a time."""

    def __init__(self, world: Any, workers: int = 0):
        self.world = world
        self.limit = asyncio.Semaphore(max(1, workers or os.cpu_count() or 1))

    async def reason(self, record: dict) -> str | None:
        async with self.limit:
            return await asyncio.to_thread(self.world.vet_evolved, record)


def alpaca_prompt(instruction: str) -> str:
    """What a local model without a chat template is asked: the Alpaca prompt it was fine-tuned on."""
    return math_prompt(instruction, cot=False)


class WorldEvolver:
    """The offline evolver: the world's own programmatic edits (the arithmetic world's carry injected defects)."""

    def __init__(self, cfg: RunConfig, world: Any):
        self.cfg, self.world = cfg, world
        self.model = f"{world.name}-evolver"

    async def evolve(self, task: Task) -> Outcome:
        rng = seeded_rng(self.cfg.base.seed, task.id, "evolve")
        out = self.world.evolve(self.cfg, task.parent, task.operator, rng)
        record = child_record(task, out["text"], self.model, answer=out["answer"] if self.cfg.evol_instruct.with_answers
                              else None, extra=out.get("extra"))
        reason = elimination_reason(task.parent["text"], out["text"], finish_reason=out.get("finish_reason"))
        if reason is None and record.get("answer") is not None:
            # in this task's own turn, never in a thread: an offline run's outcomes keep the order of its tasks, so
            # its files and figures repeat (a thread hop let 64 live tasks finish in the scheduler's order)
            reason = self.world.vet_evolved(record)
        return Outcome("eliminated", {**record, "reason": reason}) if reason else Outcome("kept", record)


JUDGE_ATTEMPTS = 3  # equality-judge replies read before the evolution is recorded as failed
EQUALITY_TOKENS = 32  # room for "Different. The second problem adds ..." (the verdict is its first word)


class LLMEvolver:
    """Evolution through a chat backend: operator template → evolved text → checks → optional answer."""

    def __init__(self, cfg: RunConfig, backend: Any, templates: dict[str, str], judge: bool):
        self.cfg, self.backend, self.templates, self.judge = cfg, backend, templates, judge
        self._request = ChatRequest
        prompts = cfg.resolve(cfg.evol_instruct.prompts_dir)
        world = world_for(cfg)
        self.answer_template = world.answer_template(prompts) if cfg.evol_instruct.with_answers else ""
        self.tests_template = world.tests_template(prompts) if cfg.evol_instruct.with_answers else None
        self.world, self.vetting = world, Vetting(world, cfg.eval.code_workers)
        self.equality_template = read_user_text(prompts / "evol" / "equality.txt", kind="a prompt template")
        self.model = backend.model

    def _ask(self, key: str, content: str, temperature: float, max_tokens: int, sample_index: int = 0):
        ev = self.cfg.evol_instruct
        return self._request(key=key, messages=({"role": "user", "content": content},), temperature=temperature,
                             top_p=ev.top_p, max_tokens=max_tokens, sample_index=sample_index)

    async def _equal(self, task: Task, parent: str, child: str, usage: Counter) -> tuple[bool | None, Any]:
        """The equality judge's verdict (None: no readable verdict in JUDGE_ATTEMPTS replies) and the last result."""
        q = self.equality_template.replace("{parent}", parent).replace("{child}", child)
        result = None
        for attempt in range(JUDGE_ATTEMPTS):  # a re-ask at temperature > 0, as the reward judges do
            result = await self.backend.acomplete(self._ask(task.id + "#equal", q, 0.0 if attempt == 0 else 0.7,
                                                            EQUALITY_TOKENS, sample_index=attempt))
            if not result.ok:
                return None, result
            usage.update(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
            verdict = parse_equality(result.text, cut=cut_off(result))
            if verdict is not None:
                return verdict, result
        return None, result

    async def evolve(self, task: Task) -> Outcome:
        ev, usage = self.cfg.evol_instruct, Counter()
        prompt = self.templates[task.operator.name].replace("{instruction}", task.parent["text"])
        result = await self.backend.acomplete(self._ask(task.id, prompt, ev.temperature, ev.max_new_tokens))
        if not result.ok:
            return self._failure(task, result)
        usage.update(prompt_tokens=result.prompt_tokens, completion_tokens=result.completion_tokens)
        text = clean_evolved_text(result.text)
        record = child_record(task, text, self.model, usage=usage)
        reason = elimination_reason(task.parent["text"], text, finish_reason=result.finish_reason)
        if reason is None and self.judge:
            equal, verdict = await self._equal(task, task.parent["text"], text, usage)
            if not verdict.ok:
                return self._failure(task, verdict)
            if equal is None:  # never guessed: the evolution is failed (with [evol_instruct] cache on, a rerun gets the
                # same replies back; cache = false asks anew)
                return self._failure(task, replace(verdict, text=None, error="equality judge: no readable verdict in "
                                                   f"{JUDGE_ATTEMPTS} replies (last: {(verdict.text or '')[:80]!r})"))
            reason = "no_new_information" if equal else None
        if reason:
            return Outcome("eliminated", {**record, "reason": reason, "usage": dict(usage)})
        if ev.with_answers:
            q = self.answer_template.replace("{instruction}", text)
            answer = await self.backend.acomplete(self._ask(task.id + "#answer", q, 0.0, ev.max_new_tokens))
            if answer.ok and cut_off(answer):  # "The answer is: 8" cut from 86 must not reach the SFT data
                answer = replace(answer, text=None, error="answer " + cut_off_reason(
                    ev.max_new_tokens, "[evol_instruct] max_new_tokens"))
            if not answer.ok:
                return self._failure(task, answer)
            usage.update(prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens)
            record["answer"] = answer.text.strip()
            reason = answer_elimination_reason(answer.text)
            if reason:  # the response-level rules: the instruction is fine, its answer is not one
                return Outcome("eliminated", {**record, "reason": reason, "usage": dict(usage)})
            if self.tests_template is not None:  # code: the endpoint writes the task's tests
                q = self.tests_template.replace("{instruction}", text).replace("{answer}", record["answer"])
                tests = await self.backend.acomplete(self._ask(task.id + "#tests", q, 0.0, ev.max_new_tokens))
                if tests.ok and cut_off(tests):
                    tests = replace(tests, text=None, error="tests " + cut_off_reason(
                        ev.max_new_tokens, "[evol_instruct] max_new_tokens"))
                if not tests.ok:
                    return self._failure(task, tests)
                usage.update(prompt_tokens=tests.prompt_tokens, completion_tokens=tests.completion_tokens)
                record.update(self.world.read_tests(record, tests.text))
            reason = await self.vetting.reason(record)
            if reason:  # the world's own check: a code task's tests run against its answer in the sandbox
                return Outcome("eliminated", {**record, "reason": reason, "usage": dict(usage)})
        return Outcome("kept", {**record, "usage": dict(usage)})

    def _failure(self, task: Task, result: Any) -> Outcome:
        # A budget cap or a rejected endpoint (401/403/404) stops the run: not this record's fault,
        # so it is not written and costs no retry attempt; the next run picks it up.
        stopped = getattr(self.backend, "stopped_reason", None) or (result.error or "").startswith("budget")
        kind = "stopped" if stopped else "failed"
        return Outcome(kind, {"id": task.id, "root_id": task.root_id, "round": task.round,
                              "operator": task.operator.name, "error": result.error})


def child_record(task: Task, text: str, model: str, answer: str | None = None, usage: Counter | None = None,
                  extra: dict | None = None) -> dict:
    rec = {"id": task.id, "parent_id": task.parent["id"], "root_id": task.root_id, "round": task.round,
           "operator": task.operator.name, "direction": task.operator.direction, "text": text,
           "answer": answer, "model": model,
           "usage": dict(usage or {"prompt_tokens": 0, "completion_tokens": 0})}
    return {**rec, **(extra or {})}


def make_evolver(cfg: RunConfig, settings: Any = None, ledger: Path | None = None) -> Any:
    """The evolver chosen by ``[evol_instruct].backend`` (a plain ``if``, no registry); through an endpoint, its
    requests are accounted in the usage ledger ``ledger`` (the calling step's own)."""
    ev = cfg.evol_instruct
    world = world_for(cfg)
    if world.evolves_offline(cfg):  # the world's own evolver; run_evolve checks the seeds are the world's problems
        return WorldEvolver(cfg, world)
    templates = world.evol_templates(cfg.resolve(ev.prompts_dir))
    if ev.backend == "hf":
        if not ev.hf_model:
            raise ValueError("[evol_instruct] backend = 'hf' needs hf_model = <local model path>")
        backend = HFBackend(str(cfg.resolve(ev.hf_model)), load_model=load_causal_lm, load_tokenizer=load_tokenizer,
                            prompt_format=alpaca_prompt)
        return LLMEvolver(cfg, backend, templates, judge=False)
    backend = make_llm_backend(cfg, settings, ledger=ledger, prompt_format=alpaca_prompt)  # as HFBackend's above
    return LLMEvolver(cfg, backend, templates, judge=ev.equality_judge)


