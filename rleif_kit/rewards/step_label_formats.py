"""Step-labelled solutions in the formats people have, read into one record for the PRM toolkit (``rleif prm``).

Every format becomes ``{"id", "question", "steps": [str], "labels": [bool | None], "class"?, "solution"?}``: one
label per step, true = the step is right, None = not labelled (a step after the first error that nobody rated, or a
neutral step read with ``neutral="skip"``). ``class`` is a row's subset when it has one (Math-Shepherd's ``task``, a
``class`` field); ``solution`` is the kit's own whole solution text, kept so a kit PRM scores it as it was trained.

The formats (``FORMATS``; the first row of a file tells which, :func:`detect_format`, or name it):

- ``prm800k``: OpenAI's PRM800K labels (github.com/openai/prm800k): ``question.problem``, ``label.steps[]`` each with
  ``completions[].text / rating`` (-1 wrong, 0 neutral, +1 right, null unrated), ``chosen_completion`` (the index of
  the completion the trajectory went on with) and ``human_completion`` (phase 1: a step the labeler wrote, right by
  construction). A step whose ``chosen_completion`` and ``human_completion`` are both null ends the trajectory: with
  ``finish_reason = "found_error"`` the step taken is the first completion rated -1 there (the error the labeler
  found), else the row stops before it. A row left before its first step (``finish_reason`` ``bad_problem`` or
  ``give_up``) is skipped and counted, not an error.
- ``math_shepherd``: Math-Shepherd (huggingface.co/datasets/peiyi9979/Math-Shepherd): ``input`` is the problem and
  the solution with the tag ``ки`` after each step, ``label`` the same text with each tag replaced by ``+`` or ``-``;
  the question is the text before ``Step 1:``; ``task`` (GSM8K / MATH) is the class.
- ``trl``: TRL's stepwise supervision, ``prompt`` (a string), ``completions`` (the steps), ``labels`` (one boolean
  per step; 0 / 1 are read as booleans too).
- ``kit``: the kit's own ``prm_steps.jsonl`` (``rewards/rm_datasets.py``): TRL's three fields and ``id``,
  ``solution``, ``source``, ``split``.
- ``prm_data``: the kit's ``[reward_model] prm_data`` input, ``question``, ``steps``, ``labels`` (bool or -1/0/+1).
- ``processbench``: ProcessBench's rows (``problem``, ``steps``, ``label`` = the index of the first wrong step, -1
  when none): the steps before it are right, it is wrong, those after it are unlabelled.

A neutral rating (PRM800K's 0, a 0 in ``prm_data``) is read as ``neutral`` says: ``"right"`` (the default: it is
not an error, and ProcessBench and OpenR count it so), ``"wrong"`` (the pipeline's ``[reward_model] prm_data``
training does: a step that does not move the solution forward earns nothing) or ``"skip"`` (None: left out of the
step metrics and never a first error).

A malformed row is one line, ``file:line: field 'x': what is wrong`` (:class:`StepLabelError`), read through the
kit's reader of user files (``core/jsonl.read_user_jsonl``: a regular file, bounded lines, UTF-8 JSON objects).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterator

from rleif_kit.core.jsonl import read_user_jsonl
from rleif_kit.core.user_files import UserFileError

FORMATS = ("prm800k", "math_shepherd", "trl", "kit", "prm_data", "processbench")
NEUTRAL = ("right", "wrong", "skip")
SHEPHERD_TAG = "ки"
_FIRST_STEP = re.compile(r"Step\s*1\s*:")
WHAT = "step labels"


class StepLabelError(UserFileError):
    """A row of a step-label file is not what its format says: ``file:line: field 'x': ...``."""


def detect_format(row: dict) -> str | None:
    """The format a row's keys say (:data:`FORMATS`), else None."""
    if isinstance(row.get("label"), dict) and "question" in row:
        return "prm800k"
    if "input" in row and "label" in row:
        return "math_shepherd"
    if "completions" in row and "labels" in row:
        return "kit" if "solution" in row else "trl"
    if "steps" in row and "labels" in row:
        return "prm_data"
    if "steps" in row and "label" in row:
        return "processbench"
    return None


def _bad(where: str, field: str, what: str) -> StepLabelError:
    return StepLabelError(f"{where}: field '{field}': {what}")


def _text(row: dict, key: str, where: str, field: str | None = None) -> str:
    value = row.get(key)
    if not isinstance(value, str):
        raise _bad(where, field or key, "missing" if key not in row else f"expected a string, got {_kind(value)}")
    return value


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _str_list(row: dict, key: str, where: str) -> list[str]:
    value = row.get(key)
    if key not in row:
        raise _bad(where, key, "missing")
    if not isinstance(value, list) or not value:
        raise _bad(where, key, f"expected a non-empty list of strings, got {_kind(value) if value != [] else '[]'}")
    for i, s in enumerate(value):
        if not isinstance(s, str):
            raise _bad(where, f"{key}[{i}]", f"expected a string, got {_kind(s)}")
    return value


def _rating(value: Any, where: str, field: str, neutral: str) -> bool | None:
    """A label as a boolean: true / 1 right, false / -1 wrong, 0 as ``neutral`` says, null unlabelled."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (-1, 0, 1):
        if value == 0:
            return {"right": True, "wrong": False, "skip": None}[neutral]
        return value == 1
    raise _bad(where, field, f"expected true, false, -1, 0 or 1, got {value!r}")


def _labels(row: dict, key: str, where: str, n: int, neutral: str, binary: bool = False) -> list[bool | None]:
    value = row.get(key)
    if key not in row:
        raise _bad(where, key, "missing")
    if not isinstance(value, list):
        raise _bad(where, key, f"expected a list with one label per step, got {_kind(value)}")
    if len(value) != n:
        raise _bad(where, key, f"{len(value)} labels for {n} steps")
    out = []
    for i, v in enumerate(value):
        if binary and v not in (True, False, 0, 1):  # TRL's labels are booleans (0 / 1 read as such)
            raise _bad(where, f"{key}[{i}]", f"expected true or false, got {v!r}")
        out.append(bool(v) if binary else _rating(v, where, f"{key}[{i}]", neutral))
    return out


def _class(row: dict, *keys: str) -> dict:
    for key in keys:
        if isinstance(row.get(key), str) and row[key]:
            return {"class": row[key]}
    return {}


SKIPPED_FINISH = ("bad_problem", "give_up")  # PRM800K rows a labeler left before any step: not malformed


def _prm800k(row: dict, where: str, neutral: str) -> dict | None:
    question = row.get("question")
    if not isinstance(question, dict):
        raise _bad(where, "question", f"expected an object with 'problem', got {_kind(question)}")
    problem = _text(question, "problem", where, "question.problem")
    label = row["label"]
    steps_in = label.get("steps")
    if not isinstance(steps_in, list):
        raise _bad(where, "label.steps", f"expected a list of steps, got {_kind(steps_in)}")
    steps, labels = [], []
    for i, step in enumerate(steps_in):
        at = f"label.steps[{i}]"
        if not isinstance(step, dict):
            raise _bad(where, at, f"expected an object, got {_kind(step)}")
        completions = step.get("completions")
        if not isinstance(completions, list) or not all(isinstance(c, dict) for c in completions):
            raise _bad(where, f"{at}.completions", "expected a list of {text, rating} objects")
        chosen, human = step.get("chosen_completion"), step.get("human_completion")
        if chosen is not None:
            if not isinstance(chosen, int) or isinstance(chosen, bool) or not 0 <= chosen < len(completions):
                raise _bad(where, f"{at}.chosen_completion",
                           f"{chosen!r} is not an index into its {len(completions)} completions")
            c = completions[chosen]
            steps.append(_text(c, "text", where, f"{at}.completions[{chosen}].text"))
            labels.append(_rating(c.get("rating"), where, f"{at}.completions[{chosen}].rating", neutral))
        elif human is not None:  # phase 1: the labeler's own step, written to be right
            text = human.get("text") if isinstance(human, dict) else human
            if not isinstance(text, str):
                raise _bad(where, f"{at}.human_completion", "expected a string or an object with 'text'")
            steps.append(text)
            labels.append(True)
        else:  # the trajectory ends here: at the error found, if one was
            wrong = [c for c in completions if c.get("rating") == -1]
            if label.get("finish_reason") == "found_error" and wrong:
                steps.append(_text(wrong[0], "text", where, f"{at}.completions[{completions.index(wrong[0])}].text"))
                labels.append(False)
            break
    if not steps:
        if label.get("finish_reason") in SKIPPED_FINISH:  # nothing to learn or judge: skipped, counted
            return None
        raise _bad(where, "label.steps", f"no labelled step (finish_reason {label.get('finish_reason')!r})")
    return {"id": str(row.get("id", "")), "question": problem, "steps": steps, "labels": labels}


def _math_shepherd(row: dict, where: str, neutral: str) -> dict:
    text, label = _text(row, "input", where), _text(row, "label", where)
    one = text.replace(SHEPHERD_TAG, "\x00")  # a one-character tag: its index is the label's +/- in ``label``
    ends = [i for i, ch in enumerate(one) if ch == "\x00"]
    if not ends:
        raise _bad(where, "input", f"no step tag {SHEPHERD_TAG!r}: not a Math-Shepherd row")
    if len(label) != len(one):
        raise _bad(where, "label", "not the input with each tag replaced by + or - (the lengths differ)")
    labels = []
    for k, i in enumerate(ends):
        if label[i] not in "+-":
            raise _bad(where, "label", f"step {k + 1}: {label[i]!r} where the tag is, expected + or -")
        labels.append(label[i] == "+")
    first = _FIRST_STEP.search(one)
    start = first.start() if first and first.start() < ends[0] else 0
    question = one[:start].strip()
    pieces = [one[a:b] for a, b in zip([start] + [e + 1 for e in ends[:-1]], ends)]
    steps = [p.strip() for p in pieces]
    if not question:
        raise _bad(where, "input", "no question before 'Step 1:'")
    return {"id": str(row.get("id", "")), "question": question, "steps": steps, "labels": labels,
            **_class(row, "class", "task")}


def _trl(row: dict, where: str, neutral: str) -> dict:
    prompt = row.get("prompt")
    if not isinstance(prompt, str):
        raise _bad(where, "prompt", "missing" if "prompt" not in row else
                   f"expected a string (the conversational form, a list of messages, is not read), got {_kind(prompt)}")
    steps = _str_list(row, "completions", where)
    return {"id": str(row.get("id", "")), "question": prompt, "steps": steps,
            "labels": _labels(row, "labels", where, len(steps), neutral, binary=True), **_class(row, "class")}


def _kit(row: dict, where: str, neutral: str) -> dict:
    out = _trl(row, where, neutral)
    return {**out, "solution": _text(row, "solution", where)}


def _prm_data(row: dict, where: str, neutral: str) -> dict:
    steps = _str_list(row, "steps", where)
    return {"id": str(row.get("id", "")), "question": _text(row, "question", where), "steps": steps,
            "labels": _labels(row, "labels", where, len(steps), neutral), **_class(row, "class")}


def _processbench(row: dict, where: str, neutral: str) -> dict:
    steps = _str_list(row, "steps", where)
    first = row.get("label")
    if not isinstance(first, int) or isinstance(first, bool) or not -1 <= first < len(steps):
        raise _bad(where, "label", f"expected the index of the first wrong step (-1: none) below {len(steps)}, "
                                   f"got {first!r}")
    labels = [True] * len(steps) if first == -1 else [True] * first + [False] + [None] * (len(steps) - first - 1)
    return {"id": str(row.get("id", "")), "question": _text(row, "problem", where), "steps": steps,
            "labels": labels, **_class(row, "class")}


READERS = {"prm800k": _prm800k, "math_shepherd": _math_shepherd, "trl": _trl, "kit": _kit, "prm_data": _prm_data,
           "processbench": _processbench}


def _check_options(fmt: str | None, neutral: str) -> None:
    if fmt not in (None, "auto", *FORMATS):
        raise ValueError(f"unknown step-label format {fmt!r} (formats: {', '.join(FORMATS)})")
    if neutral not in NEUTRAL:
        raise ValueError(f"neutral = {neutral!r}: expected one of {', '.join(NEUTRAL)}")


def iter_step_labels(path: str | os.PathLike[str], fmt: str | None = None, neutral: str = "right"
                     ) -> Iterator[tuple[str, dict | StepLabelError | None]]:
    """``("file:line", the record, the row's error, or None for a row skipped)`` for each row of ``path``; ``fmt``
    None or "auto": the first row's format. A row without an ``id`` is named ``<file stem>-<line>`` (a scores file
    made from the same data has the same ids). A file that is not JSONL at all (a bad line, a directory, a FIFO)
    raises UserFileError here."""
    _check_options(fmt, neutral)
    path = Path(path)
    for where, row in read_user_jsonl(path, WHAT):
        if fmt in (None, "auto"):
            fmt = detect_format(row)
            if fmt is None:
                raise StepLabelError(f"{where}: no step-label format has these fields ({', '.join(sorted(row))}); "
                                     f"formats: {', '.join(FORMATS)} (docs/cli.md, rleif prm)")
        try:
            record = READERS[fmt](row, where, neutral)
        except StepLabelError as e:
            yield where, e
            continue
        if record is None:
            yield where, None
            continue
        if not record["id"]:
            record["id"] = f"{path.stem}-{where.rsplit(':', 1)[1]}"
        yield where, {**record, "format": fmt}


def read_step_labels(path: str | os.PathLike[str], fmt: str | None = None, neutral: str = "right") -> list[dict]:
    """Every record of ``path`` (:func:`iter_step_labels`); the first malformed row raises its one line."""
    out = []
    for _, record in iter_step_labels(path, fmt, neutral):
        if isinstance(record, StepLabelError):
            raise record
        if record is not None:
            out.append(record)
    if not out:
        raise StepLabelError(f"{path}: no rows")
    return out


def dry_run(path: str | os.PathLike[str], fmt: str | None = None, neutral: str = "right", examples: int = 2) -> dict:
    """What ``path`` holds without scoring anything: its format, rows, steps, the share of labelled steps that are
    right, rows with an error (the first few of their lines), rows skipped and a few parsed records."""
    rows, errors, parsed, found = 0, [], [], None
    steps = right = labelled = skipped = 0
    for _, record in iter_step_labels(path, fmt, neutral):
        rows += 1
        if record is None:
            skipped += 1
            continue
        if isinstance(record, StepLabelError):
            errors.append(str(record))
            continue
        found = record["format"]
        steps += len(record["steps"])
        known = [v for v in record["labels"] if v is not None]
        labelled += len(known)
        right += sum(known)
        if len(parsed) < examples:
            parsed.append(record)
    return {"file": str(path), "format": found or fmt, "rows": rows, "steps": steps, "labelled_steps": labelled,
            "right_share": right / labelled if labelled else None, "rows_with_error": len(errors),
            "rows_skipped": skipped, "errors": errors[:5], "examples": parsed}


def format_dry_run(summary: dict) -> str:
    """The dry run as a few lines."""
    share = summary["right_share"]
    lines = [f"{summary['file']}: format {summary['format']}, {summary['rows']} rows, {summary['steps']} steps "
             f"({summary['labelled_steps']} labelled, {'n/a' if share is None else f'{share:.1%}'} right), "
             f"{summary['rows_with_error']} row(s) with an error"
             + (f", {summary['rows_skipped']} skipped (left before any step)" if summary["rows_skipped"] else "")]
    lines += [f"  {e}" for e in summary["errors"]]
    for r in summary["examples"]:
        lines.append(f"  example {r['id']}" + (f" [{r['class']}]" if r.get("class") else "") +
                     f": {_short(r['question'])}")
        lines += [f"    {'?' if v is None else '+' if v else '-'} {_short(s)}" for s, v in zip(r["steps"], r["labels"])]
    return "\n".join(lines)


def _short(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."
