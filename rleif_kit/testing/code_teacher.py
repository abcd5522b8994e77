"""The loopback teacher of the code arm: an OpenAI-compatible server that plays the chat model Code Evol-Instruct
asks, over the tiny code world's tasks, so the endpoint path of a code run — evolution, the equality judge, the
answer in a ```python block and the tests the kit runs against it, the IRM's sibling rankings and the PRM's step
labels — is exercised offline (``demo_code.py`` runs the whole preset through it).

It knows the tiny code world (``worlds/tiny_code``): an evolve request is a task it can read, edited with the
world's own structural edit for the operator its template names; an answer is the task's solution (the world's
teacher fault at ``fault``), wrapped the way chat models write code (a sentence, the block, an explanation); tests
are four asserts in a block, one of them wrong at ``wrong_tests`` (as a model's hand-computed expected value is),
which the kit's sandbox check must then eliminate; now and then a rewrite loses what the function returns (the
judge then ranks it last, so the IRM learns it). Replies come with real models' habits: preambles.

    server, teacher = serve_code()          # a FakeOpenAIServer; teacher.asked counts the requests by kind
"""

from __future__ import annotations

import hashlib
import random
import re
import threading
from collections import Counter
from typing import Any

from rleif_kit.testing import teacher_styles as styles
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.worlds.code.postprocess import extract_code
from rleif_kit.worlds.code.verifier import check_responses
from rleif_kit.worlds.tiny_code import tasks as tc
from rleif_kit.worlds.tiny_code.evolver import edit_task

OPERATORS = (("one more requirement", "add_requirement"), ("less common and more", "rarer_requirement"),
             ("as an easier one", "simplify"), ("different subject", "new_topic"))
KINDS = (("Reply with the single word", "check"), ("You are judging", "ranking"), ("You are checking a step-by-step solution", "step_labels"),
         ("You write unit tests", "tests"), ("Solve the task below in Python", "answer"),
         ("Here are two problems.", "equality"), ("Original task:", "evolve"))
VARIANT = re.compile(r"Variant ([A-Z]):\n(.*?)(?=\n\nVariant [A-Z]:|\n\nThink briefly|\Z)", re.S)
STEP = re.compile(r"^Step \d+: ?", re.M)
INTEGER = re.compile(r"-?\d+")
PREAMBLES = ("", "", "Sure! Here's the rewritten task:\n\n", "Rewritten task:\n")


def _norm(text: str) -> str:
    return " ".join(text.split()).strip().strip('"')


def _after(prompt: str, start: str, end: str | None = None) -> str:
    text = prompt.split(start, 1)[1] if start in prompt else prompt
    return _norm(text.split(end, 1)[0] if end and end in text else text)


class CodeTeacher:
    """``reply(body) -> text``, the responder of :class:`FakeOpenAIServer`; ``asked`` counts requests by kind."""

    def __init__(self, seed: int = 0, fault: float = 0.3, wrong_tests: float = 0.15, max_ops: int = 2,
                 vague: float = 0.15):
        self.seed, self.fault, self.wrong_tests, self.max_ops, self.vague = seed, fault, wrong_tests, max_ops, vague
        self.known: dict[str, tc.Task] = {}
        self.vague_texts: set[str] = set()  # rewrites that no longer say what to return
        self.asked: Counter = Counter()  # requests by kind
        self._seen: Counter = Counter()
        self._lock = threading.Lock()

    def learn(self, records: list[dict]) -> None:
        """Tasks the teacher can read (the run's seeds): ``{"text" or "question", "problem"}``."""
        for r in records:
            self.known[_norm(r.get("text") or r["question"])] = tc.Task.from_problem(r["problem"])

    def is_vague(self, text: str) -> bool:
        """Whether ``text`` is one of this teacher's rewrites that lost what the function returns."""
        return _norm(text) in self.vague_texts

    def _rng(self, prompt: str) -> random.Random:
        with self._lock:
            key = hashlib.sha256(prompt.encode()).hexdigest()
            self._seen[key] += 1  # the n-th asking of one prompt draws anew
            return random.Random(f"{self.seed}-{key}-{self._seen[key]}")

    def reply(self, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        kind = next((k for marker, k in KINDS if marker in prompt), "other")
        with self._lock:
            self.asked[kind] += 1
        rng = self._rng(prompt)
        return getattr(self, f"_{kind}")(prompt, rng)

    def _task(self, text: str) -> tc.Task | None:
        return self.known.get(_norm(text))

    def _evolve(self, prompt: str, rng: random.Random) -> str:
        task = self._task(_after(prompt, "Original task:"))
        flat = _norm(prompt)  # a template's phrase may break across lines
        operator = next((op for phrase, op in OPERATORS if phrase in flat), None)
        if task is None or operator is None:
            return "I'm sorry, but I can't rewrite this task."
        child = edit_task(task, operator, rng, self.max_ops)
        text = child.instruction()
        vague = rng.random() < self.vague
        if vague:  # the rewrite lost what to return, though the model still answers the task it meant
            text = text.split(" that returns ")[0] + " that returns the result."
        with self._lock:
            self.known.setdefault(_norm(text), child)
            if vague:
                self.vague_texts.add(_norm(text))
        return rng.choice(PREAMBLES) + text

    def _equality(self, prompt: str, rng: random.Random) -> str:
        first = _after(prompt, "First problem:", "Second problem:")
        second = _after(prompt, "Second problem:")
        return "Equal." if first == second else rng.choice(("Different.", "**Different**", "Different: it adds a step."))

    def _answer(self, prompt: str, rng: random.Random) -> str:
        task = self._task(_after(prompt, "Task:"))
        if task is None:
            return "I can't solve a task I cannot read."
        code = task.solution(fault=task.faulty and rng.random() < self.fault)
        return f"Here is a solution:\n{code}\nIt returns the value the task asks for."

    def _tests(self, prompt: str, rng: random.Random) -> str:
        task = self._task(_after(prompt, "Task:", "Solution:"))
        if task is None:
            return "I cannot write tests for this."
        lines = task.tests(f"{self.seed}-{rng.random()}")
        if rng.random() < self.wrong_tests:  # a hand-computed expected value that is off
            head, _, expected = lines[0].rpartition(" == ")
            wrong = int(expected) + 1 if INTEGER.fullmatch(expected) else None
            lines[0] = f"{head} == {wrong}"
        return "```python\n" + "\n".join(lines) + "\n```"

    def _ranking(self, prompt: str, rng: random.Random) -> str:
        """Variants ranked as a careful judge would: one that says what to return first, then one within the
        world's size, then one without a preamble or note; ties broken at random."""
        scored = []
        for letter, text in VARIANT.findall(prompt):
            task = None if _norm(text) in self.vague_texts else self._task(text)
            clean = not any(p in text.lower() for p in ("rewritten", "here is", "here's", "note:"))
            scored.append((4 * (task is not None) + 2 * (task is not None and len(task.ops) <= self.max_ops)
                           + clean, rng.random(), letter))
        order = [letter for *_, letter in sorted(scored, reverse=True)]
        return styles.ranking(order, rng, noise=0.5)

    def _step_labels(self, prompt: str, rng: random.Random) -> str:
        """Outcome labels, as the tiny code world's own: every step right when the program passes the task's tests
        (run in the kit's sandbox), every step wrong when not; now and then a slip on one step."""
        n = int(re.search(r"Solution \((\d+) steps\)", prompt).group(1))
        task = self._task(_after(prompt, "Problem:", "Solution ("))
        if task is None:
            return styles.cannot_judge(rng)
        body = prompt.split("steps):", 1)[1].split("Answer with exactly", 1)[0].strip()
        program = STEP.sub("", body)
        right = bool(check_responses([{"problem": task.to_problem(f"{self.seed}-judge")}], [program],
                                     extract_code)[0].correct)
        labels = [right] * n
        if rng.random() < 0.05:
            i = rng.randrange(n)
            labels[i] = not labels[i]
        return styles.step_labels(labels, rng, noise=0.5)

    def _check(self, prompt: str, rng: random.Random) -> str:
        return "ok"  # rleif check-api and 00_setup's endpoint check

    def _other(self, prompt: str, rng: random.Random) -> str:
        return "I'm not sure what you are asking."


def serve_code(seed: int = 0, **kwargs: Any) -> tuple[FakeOpenAIServer, CodeTeacher]:
    """A started server playing a :class:`CodeTeacher` (stop it with ``server.stop()``)."""
    teacher = CodeTeacher(seed=seed, **kwargs)
    server = FakeOpenAIServer(responder=teacher.reply)
    server.start()
    return server, teacher
