"""A loopback teacher: an OpenAI-compatible server that plays the chat model of the real RLEIF path, offline.

Why: the real path — GSM8k / MATH files, an endpoint that evolves instructions, judges equality, answers,
rewrites solutions into steps, ranks sibling sets for the IRM and labels PRM steps, then serves an
evaluation — must run end to end in CI and in ``make demo-math`` without a network. The teacher knows a
programmatic world (the arithmetic world's word problems, written out in GSM8k and MATH format by
:func:`write_data`), so its answers are right where a good model's would be and the run learns something;
and it replies the way real chat models do — preambles ("Sure! Here's the rewritten problem:"), markdown,
explanations around a ranking, step labels in loose formats, refusals, replies cut off at ``max_tokens``
(``finish_reason = "length"``) — so the kit's parsers meet what real models send (``teacher_styles``).

Each reply is drawn from the prompt's text and how many times that prompt was asked before (a re-ask gets
another draw, as at temperature > 0), so an uninterrupted run repeats exactly. Not across a restart: the
teacher learns the problems it evolved as it evolves them, so a demo resumed from the kit's response cache
meets a teacher that does not know the cached children (it refuses them).

    python -m rleif_kit.testing.teacher --data data/tiny-math --settings data/tiny-math/settings.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import threading
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rleif_kit.testing import teacher_styles as styles
from rleif_kit.testing.fake_openai import FakeOpenAIServer
from rleif_kit.worlds.arith import problems as arith
from rleif_kit.worlds.arith.evolver import DefectRates, evolve_arith
from rleif_kit.worlds.arith.gsm8k_format import as_gsm8k

OPERATOR_PHRASES = {"one extra condition": "add_constraint", "becomes a specific one": "concretize",
                    "deeper understanding": "deepen", "more reasoning steps": "more_steps",
                    "about a different topic": "new_topic", "as an easier one": "simplify"}
KINDS = (("You are judging", "ranking"), ("You are checking a step-by-step solution", "step_labels"),
         ("Here are two problems.", "equality"), ("Rewrite the solution below", "rewrite_steps"),
         ("Solve each problem step by step", "regenerate"), ("Solve the problem below step by step", "answer"),
         ("Original problem:", "evolve"), ("### Instruction:", "served"))


MARKER = ".teacher-data"  # marks a folder whose files the teacher wrote (and may write again)


def _norm(text: str) -> str:
    return " ".join(text.split()).strip().strip('"').lower()


class World:
    """The problems the teacher knows: question text -> what it is (a Problem record, its answer, its defect)."""

    def __init__(self, seed: int = 0, n_train: int = 2000, n_test: int = 200, max_steps: int = 3,
                 max_operand: int = 9):
        self.seed, self.max_steps, self.max_operand = seed, max_steps, max_operand
        self.train, self.test = arith.generate_splits(n_train, n_test, seed=seed, min_steps=1, max_steps=max_steps,
                                                      max_operand=max_operand)
        self.known: dict[str, dict] = {}
        self._lock = threading.Lock()
        for r in self.train + self.test:
            self.add(r["question"], {"problem": r["problem"], "answer": r["solution"], "defect": None})

    def add(self, text: str, record: dict) -> None:
        with self._lock:
            self.known.setdefault(_norm(text), record)

    def lookup(self, text: str) -> dict | None:
        """The record of ``text``, or of the longest known problem it contains (a kept explanation or label)."""
        key = _norm(text)
        if key in self.known:
            return self.known[key]
        inside = [k for k in self.known if len(k) > 40 and k in key]
        return self.known[max(inside, key=len)] if inside else None


def write_data(out_dir: str | Path, world: World | None = None) -> dict[str, Path]:
    """GSM8k-format train / test files and a MATH-format train file of ``world``'s problems (every fourth
    training problem goes to MATH, with a ``\\boxed{}`` solution); returns the paths by name."""
    world = world or World()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mine = out / MARKER
    theirs = [n for n in ("gsm8k_train.jsonl", "gsm8k_test.jsonl", "math_train.jsonl") if (out / n).exists()]
    if theirs and not mine.exists():
        raise FileExistsError(f"{out}: holds {', '.join(theirs)} the teacher did not write; it writes its toy data "
                              "only into a folder of its own (point [sft] gsm8k_train somewhere else)")
    mine.write_text("files written by rleif_kit.testing.teacher: toy data, safe to delete\n")
    gsm8k = [r for i, r in enumerate(world.train) if i % 4]
    math = [r for i, r in enumerate(world.train) if not i % 4]
    paths = {"gsm8k_train": out / "gsm8k_train.jsonl", "gsm8k_test": out / "gsm8k_test.jsonl",
             "math_train": out / "math_train.jsonl"}
    _write(paths["gsm8k_train"], [as_gsm8k(r) for r in gsm8k])
    _write(paths["gsm8k_test"], [as_gsm8k(r) for r in world.test])
    _write(paths["math_train"], [{"problem": r["question"], "solution": styles.math_solution(r),
                                  "level": f"Level {r['n_steps']}", "type": "Prealgebra"} for r in math])
    return paths


def _write(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _between(prompt: str, start: str, end: str | None = None) -> str:
    text = prompt.split(start, 1)[1] if start in prompt else ""
    return (text.split(end, 1)[0] if end and end in text else text).strip()


class Teacher:
    """The responder of :class:`FakeOpenAIServer`: ``reply(body) -> (text, finish_reason)``."""

    def __init__(self, world: World | None = None, rates: DefectRates | None = None, noise: float = 1.0):
        self.world = world or World()
        self.rates = rates or DefectRates()
        self.noise = noise  # 0: every reply in the plain format the prompt asks for; 1: real models' mix
        self.asked: Counter[str] = Counter()
        self.kinds: Counter[str] = Counter()
        self._lock = threading.Lock()

    def _rng(self, prompt: str) -> random.Random:  # noqa: D401 - the draw for this prompt's n-th asking
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        with self._lock:
            self.asked[digest] += 1
            n = self.asked[digest]
        return random.Random(f"{self.world.seed}-{digest}-{n}")

    def reply(self, body: dict) -> tuple[str, str]:
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))
        kind = next((k for marker, k in KINDS if marker in prompt), "other")
        with self._lock:
            self.kinds[kind] += 1
        rng = self._rng(prompt)
        text = getattr(self, f"_{kind}")(prompt, rng)
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        return styles.maybe_cut(text, rng, self.noise, limit)

    # -------------------------------------------------------------- the requests the kit sends

    def _evolve(self, prompt: str, rng: random.Random) -> str:
        parent = self.world.lookup(_between(prompt, "Original problem:"))
        operator = next((op for phrase, op in OPERATOR_PHRASES.items() if phrase in prompt), "more_steps")
        if parent is None or parent.get("problem") is None:
            return styles.refusal(rng)
        child = evolve_arith(arith.Problem.from_record(parent["problem"]), operator, rng, rates=self.rates,
                             max_steps=self.world.max_steps, max_operand=self.world.max_operand)
        self.world.add(child.text, {k: v for k, v in asdict(child).items() if k != "text"})
        if child.defect == "refusal":
            return child.text
        return styles.rewritten(child.text, operator, rng, self.noise)

    def _equality(self, prompt: str, rng: random.Random) -> str:
        a = self.world.lookup(_between(prompt, "First problem:", "Second problem:"))
        b = self.world.lookup(_between(prompt, "Second problem:"))
        same = a is not None and b is not None and a.get("problem") == b.get("problem")
        return styles.equality(same, rng, self.noise)

    def _solution(self, question: str, rng: random.Random, slip: float = 0.08) -> tuple[Any, bool]:
        """(the steps (a, symbol, b, result), whether one slipped) or (a reply saying it cannot, False)."""
        record = self.world.lookup(question)
        if record is None or record.get("problem") is None or record.get("defect") in ("unsolvable", "ambiguous"):
            return styles.cannot_solve(rng), False
        problem = arith.Problem.from_record(record["problem"])
        steps = problem.step_values()
        if not rng.random() < slip * self.noise:
            return steps, False
        i = rng.randrange(len(steps))  # even a good teacher slips now and then; the later steps build on it
        out, cur = steps[:i], None
        for j, op in enumerate(problem.ops[i:], start=i):
            a = steps[j][0] if cur is None else cur
            cur = steps[j][3] + rng.choice((-2, -1, 1, 2)) if j == i else a + op.value if op.kind == "add" else \
                a - op.value if op.kind == "sub" else a * op.value if op.kind == "mul" else a // max(op.value, 1)
            out.append((a, arith.SYMBOLS[op.kind], op.value, cur))
        return out, True

    def _answer(self, prompt: str, rng: random.Random) -> str:
        steps, _ = self._solution(_between(prompt, "Problem:"), rng)
        return steps if isinstance(steps, str) else styles.solution(steps, rng, self.noise)

    def _regenerate(self, prompt: str, rng: random.Random) -> str:
        steps, _ = self._solution(prompt.rsplit("Problem:", 1)[-1].split("Solution:", 1)[0], rng)
        return steps if isinstance(steps, str) else styles.solution(steps, rng, self.noise)

    def _served(self, prompt: str, rng: random.Random) -> str:
        question = _between(prompt, "### Instruction:", "### Response:")
        steps, _ = self._solution(question, rng, slip=0.2)
        return steps if isinstance(steps, str) else " " + styles.solution(steps, rng, 0.0)

    def _rewrite_steps(self, prompt: str, rng: random.Random) -> str:
        steps, _ = self._solution(_between(prompt, "Problem:", "Solution:"), rng, slip=0.0)
        return steps if isinstance(steps, str) else styles.solution(steps, rng, self.noise)

    def _ranking(self, prompt: str, rng: random.Random) -> str:
        variants = re.findall(r"Variant ([A-Z]):\n(.*?)(?=\n\nVariant [A-Z]:|\n\nThink briefly|\Z)", prompt, re.S)
        scored = []
        for letter, text in variants:
            record = self.world.lookup(text) or {}
            scored.append((styles.quality(record, text, self.world.max_steps), rng.random(), letter))
        order = [letter for *_, letter in sorted(scored, reverse=True)]
        return styles.ranking(order, rng, self.noise)

    def _step_labels(self, prompt: str, rng: random.Random) -> str:
        question = _between(prompt, "Problem:", "Solution (")
        n = int(re.search(r"Solution \((\d+) steps\)", prompt).group(1))
        solution = _between(prompt, "steps):", "Answer with exactly")
        record = self.world.lookup(question)
        gold = arith.Problem.from_record(record["problem"]).answer() if record and record.get("problem") else None
        if gold is None:
            return styles.cannot_judge(rng)
        check = arith.verify_solution(question, solution, gold)
        labels, ok = [], True
        for i in range(n):  # as the prompt defines it: a step on an earlier mistake, a wrong final answer: wrong
            ok = ok and i < len(check.step_ok) and check.step_ok[i] and (i < n - 1 or check.answer_ok)
            labels.append(ok)
        return styles.step_labels(labels, rng, self.noise)

    def _other(self, prompt: str, rng: random.Random) -> str:
        return "ok"


def serve(data_dir: str | Path | None = None, seed: int = 0, noise: float = 1.0, port: int = 0,
          world: dict | None = None, **server_kwargs: Any) -> tuple[FakeOpenAIServer, Teacher]:
    """A started server playing the teacher of ``World(seed, **world)`` (its data written to ``data_dir`` when
    given)."""
    world = World(seed, **(world or {}))
    if data_dir is not None:
        write_data(data_dir, world)
    teacher = Teacher(world, noise=noise)
    server = FakeOpenAIServer(responder=teacher.reply, **server_kwargs)
    if port:
        server.port = port
    return server.start(), teacher


def settings_for(base_url: str, key_env: str = "RLEIF_TEACHER_KEY", data_dir: str | Path | None = None) -> dict:
    """A settings.json for the teacher: every role, prices for the cost accounting, the test set's path."""
    roles = {r: "teacher" for r in ("evolve", "irm_judge", "prm_judge", "math_eval")}
    out = {"api": {"base_url": base_url, "api_key_env": key_env, "timeout": 30, "max_retries": 2}, "models": roles,
           "prices": {"teacher": {"input_per_million": 0.5, "output_per_million": 1.5}}}
    if data_dir is not None:
        out["eval"] = {"gsm8k_path": str(Path(data_dir) / "gsm8k_test.jsonl")}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="serve the loopback teacher (and write its data) until interrupted")
    p.add_argument("--data", default="data/tiny-math", help="where the GSM8k / MATH-format files go")
    p.add_argument("--settings", help="write a settings.json for this server here")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    server, _ = serve(args.data, args.seed)
    if args.settings:
        Path(args.settings).write_text(json.dumps(settings_for(server.base_url, data_dir=args.data), indent=1))
    print(f"teacher at {server.base_url} (data in {args.data}); Ctrl-C stops it", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
