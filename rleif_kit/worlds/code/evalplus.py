"""HumanEval+ and MBPP+ as EvalPlus scores them: every base and extra input, judged against the reference's output.

Why: EvalPlus's "plus" score runs each task's original inputs (``base_input``) and its generated extra inputs
(``plus_input``, about 80 times as many on HumanEval, 35 on MBPP) and compares the candidate's output on each with
the reference solution's (``canonical_solution``); no PyPI package ships these inputs (the ``evalplus`` package
downloads them at run time), so they are read from EvalPlus's release files on disk: ``HumanEvalPlus-v0.1.10.jsonl``
and ``MbppPlus-v0.2.0.jsonl`` (``.gz`` or not; docs/wizardcoder.md says where to get them; a machine that ran
``evalplus`` once has them under ``~/.cache/evalplus/``).

How it stays unforgeable: the reference runs once per task in the sandbox (its outputs are cached by the file's
content under ``$RLEIF_CACHE_DIR`` or ``~/.cache/rleif-kit``), and a candidate runs as every other judged-by-value
program does (:mod:`rleif_kit.worlds.code.judging`): it gets the inputs only, returns plain data, and the evaluator
compares. The comparison is EvalPlus's: equal, or — for floats, with the task's ``atol`` (1e-6 once an expected
value is a float) — the same type and length and ``numpy.allclose`` at rtol 1e-7; plus its special oracles (a root
of HumanEval/32's polynomial, set equality for eight MBPP tasks, "not None" for three, four other MBPP tasks).
Base and plus inputs run as two programs, as EvalPlus runs them: ``base_correct`` is the base score, ``correct``
(base and plus both pass) the plus score.

One difference: EvalPlus limits each input to max(4 s, 4 × the reference's time) and a task to 61 s; here a
program (base or plus) gets max(``[eval] code_timeout``, 4 × the reference's time for its inputs), at most 60 s.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import math
import os
from functools import partial
from pathlib import Path
from typing import Any, Mapping, Sequence

from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.user_files import UserFileError, open_user_file, parse_json
from rleif_kit.sandbox.runner import run_many
from rleif_kit.worlds.code.judging import value_program
from rleif_kit.worlds.code.value_tests import Case, check_hashes, from_plain, to_plain

RELEASES = {"humanevalplus": "HumanEvalPlus-v0.1.10.jsonl", "mbppplus": "MbppPlus-v0.2.0.jsonl"}
RELEASE_URL = {"humanevalplus": "https://github.com/evalplus/humanevalplus_release/releases/download/v0.1.10/"
                                "HumanEvalPlus.jsonl.gz",
               "mbppplus": "https://github.com/evalplus/mbppplus_release/releases/download/v0.2.0/MbppPlus.jsonl.gz"}
FIELDS = ("task_id", "prompt", "entry_point", "canonical_solution", "base_input", "plus_input")
MAX_TIMEOUT = 60.0
REFERENCE_TIMEOUT = 120.0  # the reference on every input of one part
CACHE_VERSION = 1  # bump when what is cached changes

# MBPP+'s inputs are JSON in the file; these tasks' functions take tuples, sets or complex numbers (EvalPlus
# rebuilds them so before calling, and so must we: the reference's outputs and the candidate's depend on it).
_TUPLE_ARGS = {2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560, 579, 596, 616, 630, 726, 740,
               744, 809}  # each argument a tuple
_TUPLES_IN_ARGS = {63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473, 614, 780}  # each argument a list of tuples
_FIRST_TUPLES = {75, 413, 444, 753}  # the first argument a list of tuples
_SECOND_TUPLE = {106, 750}
_FIRST_TUPLE = {250, 405, 446, 617, 720, 763, 808}
_TUPLE_OF_TUPLES = {259, 401, 445}  # each argument a tuple of tuples
_ALL_TUPLES = {580, 615, 791}  # every list, at any depth, a tuple

# EvalPlus's special oracles (``evalplus/eval/_special_oracle.py``), by entry point
SET_EQUAL = {"similar_elements", "find_char_long", "common_in_nested_lists", "extract_singly", "larg_nnum",
             "intersection_array", "find_dissimilar", "Diff"}
NOT_NONE = {"check_str", "text_match_three", "text_starta_endb"}  # their outputs are match objects: None or not


class PlusDataError(ValueError):
    """A file that is not an EvalPlus release; the message names the file, the task and what is missing."""


def _deep_tuple(x: Any) -> Any:
    return tuple(_deep_tuple(v) for v in x) if isinstance(x, list) else x


def mbpp_inputs(number: int, inputs: list) -> list:
    """MBPP+ task ``number``'s inputs with the Python types its function takes (tuples, sets, complex)."""
    if number in _TUPLE_ARGS:
        return [[tuple(a) for a in inp] for inp in inputs]
    if number in _TUPLES_IN_ARGS:
        return [[[tuple(x) for x in a] for a in inp] for inp in inputs]
    if number in _FIRST_TUPLES:
        return [[[tuple(x) for x in inp[0]], *inp[1:]] for inp in inputs]
    if number in _SECOND_TUPLE:
        return [[inp[0], tuple(inp[1]), *inp[2:]] for inp in inputs]
    if number in _FIRST_TUPLE or number == 307:
        return [[tuple(inp[0]), *inp[1:]] for inp in inputs]
    if number in _TUPLE_OF_TUPLES:
        return [[tuple(tuple(x) for x in a) for a in inp] for inp in inputs]
    if number in _ALL_TUPLES:
        return [_deep_tuple(inp) for inp in inputs]
    if number == 115:  # a list of sets; an empty one is read as {} (EvalPlus's own reading, kept)
        return [[[set(x) if isinstance(x, list) and x else {} for x in inp[0]]] for inp in inputs]
    if number == 124:
        return [[float(inp[0]), complex(inp[1])] for inp in inputs]
    if number == 252:
        return [[complex(inp[0])] for inp in inputs]
    if number == 278:
        return [[tuple(tuple(x) if isinstance(x, list) else x for x in inp[0])] for inp in inputs]
    if number == 722:
        return [[{k: tuple(v) for k, v in inp[0].items()}, *inp[1:]] for inp in inputs]
    return inputs


def records(path: Path) -> list[dict]:
    """The JSON records of a JSONL file, gzipped (EvalPlus's ``.jsonl.gz``) or not."""
    if path.suffix != ".gz":
        return [r for _, r in read_user_jsonl(path, "EvalPlus data")]
    rows, i = [], 0
    try:  # a regular file (core/user_files.py); each line nested a sane depth, its text sendable
        with open_user_file(path, "EvalPlus data", "a gzip file of JSONL") as raw, \
                gzip.open(raw, "rt", encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    rows.append(parse_json(line, f"{path}:{i}"))
    except UserFileError:
        raise
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise PlusDataError(f"{path}: not a readable gzip file of JSONL ({exc})") from None
    except ValueError:
        raise PlusDataError(f"{path}:{i}: not JSON") from None
    return rows


def read_release(path: Path) -> list[dict]:
    """The tasks of an EvalPlus release file (JSONL, gzipped or not), each checked for the fields scoring needs."""
    rows = records(path)
    for i, r in enumerate(rows, 1):
        missing = [k for k in FIELDS if k not in r] if isinstance(r, dict) else list(FIELDS)
        if missing:
            raise PlusDataError(f"{path}: record {i}: not an EvalPlus release record (missing {', '.join(missing)}); "
                                "HumanEval+ / MBPP+ extra inputs come from EvalPlus's release files "
                                "(docs/wizardcoder.md)")
        if not (isinstance(r["base_input"], list) and isinstance(r["plus_input"], list)):
            raise PlusDataError(f"{path}: task {r['task_id']}: base_input and plus_input must be lists of calls")
    return rows


def has_plus(record: Mapping[str, Any]) -> bool:
    """Does a record carry EvalPlus's inputs and reference (a release file's record)?"""
    return all(k in record for k in ("base_input", "plus_input", "canonical_solution"))


def default_path(benchmark: str) -> Path | None:
    """EvalPlus's own cached copy of the release, where ``evalplus`` ran on this machine before."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "evalplus"
    path = root / RELEASES[benchmark]
    return path if path.exists() else None


def missing_message(benchmark: str) -> str:
    return (f"{benchmark}: no EvalPlus release file: download {RELEASE_URL[benchmark]} and set "
            f"eval.{benchmark}_path in settings.json (or pass --data); docs/wizardcoder.md")


# ------------------------------------------------------------------------------------------ the reference's outputs

def _cache_file(records: Sequence[Mapping[str, Any]]) -> Path:
    """Keyed by what decides the outputs (each task's id, entry point, prompt, reference and inputs), not the path."""
    digest = hashlib.sha256(json.dumps([[r[k] for k in FIELDS] for r in records]).encode()).hexdigest()[:20]
    root = Path(os.environ.get("RLEIF_CACHE_DIR") or Path.home() / ".cache" / "rleif-kit")
    return root / "evalplus" / f"{digest}-v{CACHE_VERSION}.json"


def _inputs(record: Mapping[str, Any], dataset: str) -> dict[str, list]:
    parts = {"base": record["base_input"], "plus": record["plus_input"]}
    if dataset == "mbppplus":  # "Mbpp/2" or 2
        parts = {k: mbpp_inputs(int(str(record["task_id"]).rsplit("/", 1)[-1]), v) for k, v in parts.items()}
    return parts


def reference_outputs(where: str, records: Sequence[Mapping[str, Any]], dataset: str,
                      workers: int | None = None) -> dict[str, dict]:
    """task_id -> {"base": [plain output], "plus": [...], "base_s", "plus_s"}: the reference solution run on every
    input in the sandbox, once per data set (cached by its content). A reference that fails on its own inputs is a
    data error naming the task (``where`` names the file)."""
    cache = _cache_file(records)
    if cache.exists():
        try:
            return json.loads(cache.read_text())
        except ValueError:
            pass  # a cut cache file: compute again
    jobs = []
    for r in records:
        called, source = called_function(dataset, r["entry_point"], r["canonical_solution"])
        for part, inputs in _inputs(r, dataset).items():
            program = value_program({"prompt": r["prompt"], "entry_point": called}, source,
                                    [Case(tuple(args), "==") for args in inputs], plain_args=True)
            jobs.append((r["task_id"], part, program))
    print(f"{dataset}: running the reference on every input once ({len(records)} tasks; cached in {cache})")
    out: dict[str, dict] = {}
    results = run_many([p for _, _, p in jobs], timeout=REFERENCE_TIMEOUT, workers=workers)
    for (tid, part, _), result in zip(jobs, results):
        data = json.loads(result.result) if result.result and not result.timed_out else None
        if not isinstance(data, list) or not all(isinstance(row, dict) and "value" in row for row in data):
            why = next((row["error"] for row in data if "error" in row), None) if isinstance(data, list) else None
            raise PlusDataError(f"{where}: task {tid}: its reference solution failed on its {part} inputs "
                                f"({(why or result.error or result.stderr or 'no output').strip()[-200:]})")
        out.setdefault(tid, {})[part] = [row["value"] for row in data]
        out[tid][f"{part}_s"] = round(result.wall_s, 3)
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(".tmp")
    tmp.write_text(json.dumps(out))
    tmp.replace(cache)
    return out


def attach(problem: dict, record: Mapping[str, Any], outputs: Mapping[str, Any], dataset: str) -> dict:
    """``problem`` with its EvalPlus parts: inputs (plain-encoded by the caller's loader), expected outputs, atol."""
    inputs = _inputs(record, dataset)
    atol = float(record.get("atol") or 0)
    return {**problem, "evalplus": {"dataset": dataset, "atol": atol,
                                    "parts": {part: {"inputs": [to_plain(list(a)) for a in inputs[part]],
                                                     "expected": outputs[part],
                                                     "reference_s": outputs.get(f"{part}_s", 0.0)}
                                              for part in ("base", "plus")}}}


# ------------------------------------------------------------------------------------------ judging

def _is_floats(x: Any) -> bool:
    if isinstance(x, float):
        return True
    return isinstance(x, (list, tuple)) and bool(x) and all(isinstance(v, float) for v in x)


def _poly(xs: Sequence[float], x: float) -> float:
    return sum(c * math.pow(x, i) for i, c in enumerate(xs))


def _surface_area(base_edge: float, height: float) -> int:  # MBPP 581: the height as the pyramid's
    slant = math.sqrt((base_edge / 2) ** 2 + height ** 2)
    return round(base_edge ** 2 + 2 * base_edge * slant)


def _digit_distance(a: int, b: int) -> int:  # MBPP 558: the shorter number padded with zeros
    x, y = str(a), str(b)
    width = max(len(x), len(y))
    return sum(abs(int(p) - int(q)) for p, q in zip(x.zfill(width), y.zfill(width)))


def _rule(dataset: str, entry: str, atol: float, case: Case, got: Any) -> bool:
    """EvalPlus's verdict on one output (``evalplus/eval/__init__.py``: ``unsafe_execute``)."""
    exp, args = case.expected, case.args
    if dataset == "humanevalplus" and entry == "find_zero":
        return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(_poly(*args, got)) <= atol
    exact = got == exp
    if dataset == "mbppplus":
        if entry == "are_equivalent":
            exact = True
        elif entry == "sum_div":
            exact = exact or got == 0
        elif entry == "surface_Area":
            exact = exact or abs(got - _surface_area(*args)) <= atol
        elif entry == "digit_distance_nums":
            exact = exact or got == _digit_distance(*args)
        elif entry in SET_EQUAL:
            items = list(got)
            check_hashes(items)  # a flood of colliding items would make set() quadratic, here in the evaluator
            exact = set(items) == set(exp)
        elif entry in NOT_NONE:
            exact = got == exp if isinstance(got, bool) else exp == (got != ["none"])
    if exact or not atol:
        return bool(exact)
    import numpy as np  # heavy: loaded on first use

    if type(got) is not type(exp) or isinstance(exp, (list, tuple)) and len(got) != len(exp):
        return False
    return bool(np.allclose(got, exp, rtol=1e-07, atol=atol))


def _judged(dataset: str, entry: str, atol: float, case: Case, got: Any) -> bool:
    try:
        return _rule(dataset, entry, atol, case, got)
    except Exception:  # noqa: BLE001 - any failure to compare (a wrong type, a ragged array) is a wrong answer
        return False


def called_function(dataset: str, entry: str, source: str) -> tuple[str, str]:
    """(the function the driver calls, the program's source): the entry point itself, or for MBPP+'s "not None"
    tasks a wrapper that returns a bool as it is and any other value as whether it is None (a match object cannot
    cross to the evaluator; whether it is None is all EvalPlus compares)."""
    if dataset != "mbppplus" or entry not in NOT_NONE:
        return entry, source
    wrapper = "__rleif_not_none"
    return wrapper, (f"{source}\n\n\ndef {wrapper}(*args):\n    r = {entry}(*args)\n"
                     "    return r if isinstance(r, bool) else ['none'] if r is None else ['some']\n")


def plus_parts(problem: Mapping[str, Any], completion: str, timeout: float) -> list[tuple[str, str, list[Case], float]]:
    """(part, program, cases, seconds) for the base and the plus inputs: the candidate's program, each case's
    expected output kept here with EvalPlus's comparison for it."""
    plus = problem["evalplus"]
    dataset, entry, base_atol = plus["dataset"], problem["entry_point"], plus["atol"]
    called, completion = called_function(dataset, entry, completion)
    out = []
    for part in ("base", "plus"):
        data, atol, cases = plus["parts"][part], base_atol, []
        for args, expected in zip(data["inputs"], data["expected"]):
            exp = from_plain(expected, [math.inf])  # the reference's outputs: no bound on what crosses
            if dataset == "mbppplus" and entry in NOT_NONE:
                exp = exp != ["none"]  # EvalPlus keeps "the reference's output is not None"
            if atol == 0 and _is_floats(exp):
                atol = 1e-6  # as EvalPlus: from the first float output on, for the rest of this part
            rule = partial(_judged, dataset, entry, atol)
            cases.append(Case(tuple(from_plain(args, [math.inf])), "rule", exp, rule=rule))
        seconds = min(MAX_TIMEOUT, max(timeout, 4 * float(data.get("reference_s") or 0)))
        program = value_program({"prompt": problem.get("prompt", ""), "entry_point": called}, completion, cases, plain_args=True)
        out.append((part, program, cases, seconds))
    return out
