"""Parse, check and normalise step-by-step solutions.

Why: the process reward model (PRM) scores a solution step by step. A solution without explicit
steps becomes ONE step, its step score rA is then always 1 and the reward signal collapses. So the
SFT data and the evolved answers must be in the canonical format of :mod:`rleif_kit.worlds.arith.problems`::

    Step 1: 3 + 5 = 8. Step 2: 8 - 2 = 6. The answer is: 6

:func:`parse_solution` finds the steps of a solution written in any common style (``Step k:``
markers, a numbered list, one step per line); :func:`normalise_solution` rewrites it into the
canonical form where the structure is clear and raises :class:`NormaliseError` where only a model
could rewrite it (a single paragraph), which is the caller's job. Pure standard library.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rleif_kit.worlds.base import AnswerRejected

__all__ = ["ParsedSolution", "parse_solution", "final_answer", "NormaliseError", "normalise_solution",
           "normalise_gsm8k", "answers_equal", "last_boxed"]

# "The answer is: X" (colon optional, "final" allowed); the LAST one counts, models restate it.
ANSWER_IS = re.compile(r"\bthe\s+(?:final\s+)?answer\s+is\b\s*:?", re.I)
# GSM8k's "#### 72": only on the last line, so a markdown "#### Step 2" heading is not an answer.
HASHES = re.compile(r"(?<!#)####(?!#)(?![ \t]*step\b)(?=[^\n]*\s*$)", re.I)
STEP_MARK = re.compile(r"(?:\*\*|#{1,6}[ \t]*)?\bstep[ \t]*(\d+)[ \t]*([:)]|\.(?!\d))(?:\*\*)?", re.I)
NUMBERED = re.compile(r"^[ \t]*(?:\*\*)?(\d+)[.)](?:\*\*)?[ \t]+", re.M)
BULLET = re.compile(r"^(?:[-*\u2022]|\d+[.)])\s+")
CALCULATOR = re.compile(r"<<[^<>\n]*=[^<>\n]*>>")  # GSM8k's "<<48/2=24>>" annotations
BOXED = re.compile(r"\\(?:boxed|fbox)\s*")
THOUSANDS = re.compile(r"^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$")
SENTENCE_END = re.compile(r"[.!?]\$*\s+|\n")
# Words that only announce an answer: "So, the final answer is" adds nothing a step needs.
CONNECTORS = re.compile(r"[\s,;:]*\b(?:so|thus|therefore|hence|and|then|finally|overall|"
                        r"in total|in conclusion|which means|this means)\b[\s,;:]*$", re.I)
ANSWER_WORDS = set("so thus therefore hence finally the final answer is our we get have find "
                   "obtain that and which gives".split())


@dataclass(frozen=True)
class ParsedSolution:
    """The steps of a solution (markers removed), its final answer, and how the steps were found."""
    steps: list[str]
    answer: str | None
    style: str  # "step_markers" | "numbered" | "lines" | "single"


class NormaliseError(AnswerRejected):
    """A solution the rules cannot put in canonical form; ``reason`` is a short fixed phrase."""


# ------------------------------------------------------------------------------ answers

def _boxed_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every ``\\boxed{...}`` / ``\\fbox{...}``; braces balanced."""
    spans = []
    for m in BOXED.finditer(text):
        i = m.end()
        if i < len(text) and text[i] == "{":
            depth = 0
            for j in range(i, len(text)):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    spans.append((m.start(), j + 1, text[i + 1:j].strip()))
                    break
        elif m.group().endswith(" "):  # "\boxed 5": MATH writes a few answers without braces
            arg = re.match(r"[^\s$]+", text[i:])
            if arg:
                spans.append((m.start(), i + arg.end(), arg.group()))
    return spans


def last_boxed(text: str) -> str | None:
    """Contents of the last ``\\boxed{...}`` or ``\\fbox{...}`` (nested braces kept), or None."""
    spans = _boxed_spans(text)
    return spans[-1][2] if spans else None


def _clean_answer(tail: str) -> str | None:
    """The answer at the start of ``tail``: its first line, up to a sentence end, unwrapped."""
    line = tail.strip().split("\n", 1)[0]
    boxed = last_boxed(line)
    if boxed is not None:
        return " ".join(boxed.split()) or None
    line = re.split(r"\.(?:\s|$)", line, maxsplit=1)[0].strip()
    for left, right in (("$", "$"), ("\\(", "\\)")):
        if len(line) > len(left + right) and line.startswith(left) and line.endswith(right):
            line = line[len(left):-len(right)]
    return " ".join(line.split()) or None


def _last(pattern: re.Pattern, text: str) -> re.Match | None:
    matches = list(pattern.finditer(text))
    return matches[-1] if matches else None


def _drop_trailing_boxed(text: str, start: int, end: int) -> str:
    """Remove the final \\boxed sentence when it only announces the answer, else unwrap the box.

    Why not always drop it: MATH often boxes the result of real work ("so $r = \\sqrt{25} =
    \\boxed{5}$"), and that computation is a step the PRM should see.
    """
    if not re.fullmatch(r"[\s$.!)\]\\]*", text[end:]):
        return text  # more text follows the box: it is not the closing sentence
    cuts = [m.end() for m in SENTENCE_END.finditer(text, 0, start)]
    sentence_start = cuts[-1] if cuts else 0
    rest = text[sentence_start:start] + text[end:]
    words = re.findall(r"[a-z]+", re.sub(r"(?i)\bstep\s*\d+", "", rest).lower())
    if all(w in ANSWER_WORDS for w in words) and not re.search(r"[=<>+*/^]", rest):
        return text[:sentence_start]
    return text[:start] + last_boxed(text[start:end]) + text[end:]


def _strip_connectors(text: str) -> str:
    """'8 - 2 = 6, so' -> '8 - 2 = 6': what is left of a step once its answer clause is cut."""
    head, tail = text[:-200], text[-200:]  # the clause is short; searching all of it is slow
    while CONNECTORS.search(tail):
        tail = CONNECTORS.sub("", tail)
    return head + tail


def _without_answer(step: str) -> str:
    """A step cut before an earlier 'the answer is' (a restated answer is no part of a step)."""
    m = ANSWER_IS.search(step)
    return _strip_connectors(step[:m.start()]) if m else step


def _split_answer(text: str) -> tuple[str, str | None]:
    """(body without the final-answer part, answer): 'The answer is', else '####', else \\boxed."""
    m = _last(ANSWER_IS, text)
    if m:
        answer, body = _clean_answer(text[m.end():]), _strip_connectors(text[:m.start()])
        if answer:
            return re.sub(r"\n?[ \t]*####[^\n]*\s*$", "", body), answer
        text = body  # a dangling "The answer is:" (a cut-off generation) is no step text
    m = _last(HASHES, text)
    if m and _clean_answer(text[m.end():]):
        return text[:m.start()], _clean_answer(text[m.end():])
    spans = _boxed_spans(text)
    if spans and spans[-1][2]:
        start, end, content = spans[-1]
        return _drop_trailing_boxed(text, start, end), " ".join(content.split())
    return text, None


def final_answer(text: str) -> str | None:
    """After the LAST 'The answer is:' (colon optional), else after '####', else the last \\boxed{}."""
    return _split_answer(text)[1]


# -------------------------------------------------------------------------------- steps

def _one_line(text: str) -> str:
    return " ".join(text.split())


def _marker_ok(text: str, m: re.Match) -> bool:
    """A 'Step k' marker opens a step, it is not a reference to one ("as in Step 1. we ...")."""
    i = m.start()
    while i > 0 and text[i - 1] in " \t":
        i -= 1
    if i == 0 or text[i - 1] == "\n":
        return True
    spaced = i < m.start()  # "Step 2:" right after "8." is fine; "lastStep 2:" is not a marker
    return spaced and (m.group(2) == ":" or text[i - 1] in ".!?:$")


def _split_markers(body: str) -> list[str]:
    marks = [m for m in STEP_MARK.finditer(body) if _marker_ok(body, m)]
    ends = [m.start() for m in marks[1:]] + [len(body)]
    return [body[m.end():end] for m, end in zip(marks, ends)]


def _split_numbered(body: str) -> list[str]:
    """Items of a list numbered 1, 2, 3, ... at line starts; other numbers are item text."""
    marks, expected = [], 1
    for m in NUMBERED.finditer(body):
        if int(m.group(1)) == expected:
            marks.append(m)
            expected += 1
    ends = [m.start() for m in marks[1:]] + [len(body)]
    return [body[m.end():end] for m, end in zip(marks, ends)]


def _logical_lines(body: str) -> list[str]:
    """Non-empty lines, a display-math block ($$ ... $$, \\[ ... \\]) kept in one line."""
    out, current = [], ""
    for line in body.split("\n"):
        current = f"{current}\n{line}" if current else line
        if current.count("$$") % 2 == 0 and current.count("\\[") <= current.count("\\]"):
            if current.strip():
                out.append(BULLET.sub("", current.strip()))
            current = ""
    if current.strip():
        out.append(BULLET.sub("", current.strip()))
    return out


def parse_solution(text: str) -> ParsedSolution:
    """Steps by 'Step k:' markers, else a numbered list, else lines, else the whole text.

    The final-answer part ('The answer is: X', '#### X', a closing '\\boxed{X}' sentence) is
    not a step; text before the first marker or list item (a preamble) is dropped.
    """
    body, answer = _split_answer(text or "")
    for style, split in (("step_markers", _split_markers), ("numbered", _split_numbered)):
        steps = [_one_line(_without_answer(s)) for s in split(body)]
        steps = [s for s in steps if s]
        if steps:
            return ParsedSolution(steps, answer, style)
    lines = [s for s in (_one_line(_without_answer(x)) for x in _logical_lines(body)) if s]
    if len(lines) >= 2:
        return ParsedSolution(lines, answer, "lines")
    return ParsedSolution(lines, answer, "single")


# --------------------------------------------------------------------------- normalising

def _plain_number(answer: str) -> str:
    """'1,000' -> '1000'; only a properly grouped number loses its commas."""
    return answer.replace(",", "") if THOUSANDS.match(answer) else answer


def _canonical(steps: list[str], answer: str) -> str:
    """'Step 1: s1. Step 2: s2. The answer is: X'; a step without final punctuation gets '.'."""
    ended = [s if s[-1] in ".!?" else s.rstrip(",;:") + "." for s in steps]
    body = " ".join(f"Step {i}: {s}" for i, s in enumerate(ended, 1))
    return f"{body} The answer is: {_plain_number(answer)}"


def normalise_solution(text: str, gold: str | None = None) -> str:
    """Rewrite a clearly structured solution into the canonical one-line step format.

    The answer comes from :func:`final_answer`, else from ``gold``. Raises
    :class:`NormaliseError` with reason "empty text", "no final answer", "answer differs from
    gold" or "no step structure" (a single paragraph: only a model can split that into steps).
    """
    if not text or not text.strip():
        raise NormaliseError("empty text")
    parsed = parse_solution(CALCULATOR.sub("", text))
    if parsed.answer is None and gold is None:
        raise NormaliseError("no final answer", text)
    if parsed.answer is not None and gold is not None and not answers_equal(parsed.answer, gold):
        raise NormaliseError("answer differs from gold", text)
    if parsed.style == "single":
        raise NormaliseError("no step structure", text)
    answer = parsed.answer if parsed.answer is not None else _one_line(str(gold))
    return _canonical(parsed.steps, answer)


def normalise_gsm8k(answer: str) -> str:
    """A GSM8k gold answer in canonical form: lines are steps, '#### X' the answer.

    The '<<48/2=24>>' calculator annotations go (the model should not learn to emit them);
    thousands separators are removed from X only, never from the step text.
    """
    body, sep, final = answer.rpartition("####")
    if not sep or not final.strip():
        raise NormaliseError("no final answer", answer)
    steps = [s for s in (_one_line(line) for line in CALCULATOR.sub("", body).split("\n")) if s]
    if not steps:
        raise NormaliseError("no step structure", answer)
    return _canonical(steps, _one_line(final))


def _as_number(text: str) -> Fraction | None:
    frac = re.fullmatch(r"-?\\[dt]?frac\{(-?\d+)\}\{(-?\d+)\}", text)
    if frac:
        text = f"{'-' if text.startswith('-') else ''}{frac.group(1)}/{frac.group(2)}"
    try:
        return Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None


def _light(text: str) -> str:
    """Drop $ , % whitespace, a trailing '.0' and a plain unit word ('5 apples' -> '5')."""
    text = re.sub(r"^(-?[\d.,/]+)\s+[A-Za-z]{2,}(?:\s+[A-Za-z]+)*\.?$", r"\1", str(text).strip())
    text = re.sub(r"\s+", "", text).replace("\\$", "").replace("\\%", "")
    text = re.sub(r"(?<=\d),(?=\d{3}(?!\d))", "", text.replace("$", "").replace("%", ""))
    return re.sub(r"(?<=\d)\.0+$", "", text.rstrip("."))


def answers_equal(a: str, b: str) -> bool:
    """Light equivalence for filtering regenerated answers ('$1,000.00' == '1000', '3/4' == '0.75').

    Deliberately small: the strict MATH equivalence checker lives in the evaluation package.
    """
    x, y = _light(a), _light(b)
    nx, ny = _as_number(x), _as_number(y)
    if nx is not None and ny is not None:
        return nx == ny
    return x == y
