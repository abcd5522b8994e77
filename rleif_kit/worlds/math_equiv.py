"""MATH answer equivalence: normalised strings first, then an exact sympy comparison under a time limit.

Why this shape: MATH golds are LaTeX written by people (``\\dfrac12``, ``10^\\circ``,
``5\\text{ cm}``, ``\\left(1,2\\right)``), so two right answers rarely match as raw strings; but a
scorer that is loose in the wrong way inflates accuracy. The rules here:
- a prediction (or gold) whose normalisation fails is wrong, never right;
- numbers compare exactly (decimals become fractions): 0.05 is not 5 and 18 is not 1800, so a
  number is never accepted at x100 or /100; 0.333 is not 1/3;
- expressions compare with ``sympy.simplify(a - b) == 0`` under a time limit, and model text is
  converted to sympy by a small whitelisting converter (``latex_to_sympy``), never ``eval``-ed raw.

``math_compat.compat_is_equiv`` reproduces WizardMath's published scorer beside this one.
"""

from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager
from fractions import Fraction
from typing import Any, Callable

MAX_SYMPY_CHARS = 200  # longer answers are compared as strings only: simplify time grows fast
MAX_EXPONENT = 1000    # guards against 10^{10^{10}}-style inputs that no timer can interrupt

_REPLACE = [("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\dbinom", "\\binom"), ("\\tbinom", "\\binom"),
            ("\\left", ""), ("\\right", ""), ("\\displaystyle", ""), ("^{\\circ}", ""), ("^\\circ", ""),
            ("\\circ", ""), ("\u00b0", ""), ("\\degree", ""), ("\\%", ""), ("%", ""),
            ("\\!", ""), ("\\,", ""), ("\\;", ""), ("\\:", ""), ("\\ ", " "), ("\\qquad", " "), ("\\quad", " "),
            ("~", " "), ("{,}", "")]
_TEXT_CMD = r"\\(?:text|textbf|textit|textnormal|mbox|mathrm|mathbf|operatorname)"
_TRAILING_UNIT = re.compile(_TEXT_CMD + r"\{[^{}]*\}(?:\^\{?\d\}?)?\s*$")
_WORD_UNITS = re.compile(r"(?<=[\d})\]])\s+[a-zA-Z]{2,}(?:\s+[a-zA-Z]+){0,2}(?:\^\{?\d\}?)?$")
_SHORT_LHS = re.compile(r"\s*(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?\s*")


def _strip_wrappers(s: str) -> str:
    """Drop ``$...$``, ``\\(...\\)``, ``\\[...\\]`` and a ``\\boxed{...}`` around the whole answer."""
    s = s.strip()
    for left, right in (("\\(", "\\)"), ("\\[", "\\]")):
        if s.startswith(left) and s.endswith(right):
            s = s[len(left):-len(right)].strip()
    m = re.fullmatch(r"\\boxed\{(.*)\}", s, flags=re.S)
    if m and _braces_balanced(m.group(1)):
        s = m.group(1).strip()
    return s


def _braces_balanced(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0


def _read_arg(s: str, i: int) -> tuple[str, int] | None:
    """One LaTeX argument at ``s[i:]``: a brace group or a single character; (content, end index)."""
    while i < len(s) and s[i] == " ":
        i += 1
    if i >= len(s):
        return None
    if s[i] != "{":
        return s[i], i + 1
    depth = 0
    for j in range(i, len(s)):
        depth += (s[j] == "{") - (s[j] == "}")
        if depth == 0:
            return s[i + 1:j], j + 1
    return None


def _rewrite_command(s: str, name: str, nargs: int, fmt: Callable[..., str]) -> str | None:
    """Replace every ``\\name{a}{b}`` (or ``\\name ab``) by ``fmt(a, b)``, innermost arguments first."""
    out, i = [], 0
    while (j := s.find(name, i)) >= 0:
        if j + len(name) < len(s) and s[j + len(name)].isalpha():  # a longer command, e.g. \binomial
            out.append(s[i:j + len(name)])
            i = j + len(name)
            continue
        out.append(s[i:j])
        k, args = j + len(name), []
        option = None
        if name == "\\sqrt" and k < len(s) and s[k] == "[":
            close = s.find("]", k)
            if close < 0:
                return None
            option, k = s[k + 1:close], close + 1
        for _ in range(nargs):
            arg = _read_arg(s, k)
            if arg is None:
                return None
            inner = _rewrite_command(arg[0], name, nargs, fmt)
            if inner is None:
                return None
            args.append(inner)
            k = arg[1]
        out.append(fmt(*args, option=option))
        i = k
    return "".join(out) + s[i:]


def normalize(answer: str | None) -> str | None:
    """A canonical string for a MATH answer, or None when it cannot be normalised (empty, unbalanced).

    Drops delimiters, ``\\left``/``\\right``, spacing, ``$``, ``%``, degrees, ``\\text{}`` units and
    trailing unit words, a trailing period, a short left-hand side (``x = 5`` -> ``5``), thousands
    commas; writes ``\\dfrac``/``\\tfrac`` as ``\\frac`` and ``\\frac12`` as ``\\frac{1}{2}``.
    """
    if answer is None or not answer.strip():
        return None
    s = answer.replace("\\\\", "\x01")  # a row break "\\\\" must survive the "\\ " (space) rule below
    s = s.replace("\n", " ").replace("\\$", "").replace("$", "")
    s = _strip_wrappers(s)
    for old, new in _REPLACE:
        s = s.replace(old, new)
    whole = re.fullmatch(_TEXT_CMD + r"\{([^{}]*)\}", s.strip())
    if whole:
        s = whole.group(1)
    while _TRAILING_UNIT.search(s) and _TRAILING_UNIT.sub("", s).strip():
        s = _TRAILING_UNIT.sub("", s)
    s = re.sub(_TEXT_CMD + r"\{([^{}]*)\}", r"\1", s)
    s = s.strip().rstrip(".").strip()
    s = _WORD_UNITS.sub("", s)
    if s.count("=") == 1 and _SHORT_LHS.fullmatch(s.split("=")[0]):
        s = s.split("=")[1]
    s = re.sub(r"^\s*[a-zA-Z]\s*\\in\s*", "", s)  # "x \in [2,5)" -> "[2,5)"
    s = re.sub(r"(\\[a-zA-Z]+)\s+(?=[a-zA-Z])", "\\1\x00", s)  # keep "\pi r" apart while spaces go
    s = re.sub(r"\s+", "", s).replace("\x00", " ").replace("\x01", "\\\\")
    if not s or not _braces_balanced(s):
        return None
    for name, nargs, fmt in (("\\frac", 2, lambda a, b, option: f"\\frac{{{a}}}{{{b}}}"),
                             ("\\binom", 2, lambda a, b, option: f"\\binom{{{a}}}{{{b}}}"),
                             ("\\sqrt", 1, lambda a, option: f"\\sqrt[{option}]{{{a}}}" if option
                              else f"\\sqrt{{{a}}}")):
        s = _rewrite_command(s, name, nargs, fmt)
        if s is None:
            return None
    if re.fullmatch(r"-?\d{1,3}(,\d{3})+(\.\d+)?", s):
        s = s.replace(",", "")
    s = re.sub(r"(?<![\d.])\.(\d)", r"0.\1", s)
    if re.fullmatch(r"-?\d+\.\d+", s):
        s = s.rstrip("0").rstrip(".")
    return s or None


# ---------------------------------------------------------------- LaTeX -> sympy

_FUNCS = {"\\sin": "sin", "\\cos": "cos", "\\tan": "tan", "\\cot": "cot", "\\sec": "sec", "\\csc": "csc",
          "\\arcsin": "asin", "\\arccos": "acos", "\\arctan": "atan", "\\ln": "log", "\\log": "log",
          "\\exp": "exp", "\\pi": "pi", "\\infty": "oo", "\\cdot": "*", "\\times": "*", "\\div": "/"}
_NAMES = {"sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "asin", "acos", "atan", "log", "exp", "pi", "oo",
          "binomial", "root"}


def latex_to_sympy(s: str) -> str | None:
    """A sympy expression string for a normalised LaTeX answer, or None when it holds anything else.

    Only digits, operators, brackets, known function names and letter runs of up to three letters
    (``2xy`` is 2*x*y) survive; anything else (``\\{``, ``|x|``, ``_``, quotes, long words) gives None,
    so nothing a model writes reaches sympy's ``eval`` except plain arithmetic on symbols.
    """
    t = _rewrite_command(s, "\\frac", 2, lambda a, b, option: f"(({a})/({b}))")
    t = t and _rewrite_command(t, "\\binom", 2, lambda a, b, option: f"binomial({a},{b})")
    t = t and _rewrite_command(t, "\\sqrt", 1, lambda a, option: f"root({a},{option})" if option else f"sqrt({a})")
    if t is None:
        return None
    for old, new in sorted(_FUNCS.items(), key=lambda kv: -len(kv[0])):
        t = re.sub(re.escape(old) + r"(?![a-zA-Z])", f" {new} ", t)
    t = t.replace("^", "**").replace("{", "(").replace("}", ")")
    if not re.fullmatch(r"[0-9a-zA-Z+\-*/().,! ]*", t) or not t.strip():
        return None

    def letters(m: re.Match) -> str:
        word = m.group()
        if word in _NAMES:
            return word
        return "*".join(word) if len(word) <= 3 else "\0"

    t = re.sub(r"[a-zA-Z]+", letters, t)
    if "\0" in t:
        return None
    return re.sub(r"\d*\.\d+", lambda m: f"({Fraction(m.group()).numerator}/{Fraction(m.group()).denominator})", t)


def to_sympy(s: str) -> Any | None:
    """Parse a normalised answer into a sympy expression (None when it cannot be, or is too big to evaluate)."""
    import sympy  # heavy: loaded on first use
    from sympy.parsing.sympy_parser import (
        factorial_notation,
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )  # heavy: loaded on first use

    text = latex_to_sympy(s) if len(s) <= MAX_SYMPY_CHARS else None
    if text is None:
        return None
    names = set(re.findall(r"[a-zA-Z]+", text))
    local = {n: sympy.Symbol(n) for n in names if n not in _NAMES}
    local.update(sqrt=sympy.sqrt, root=sympy.root, sin=sympy.sin, cos=sympy.cos, tan=sympy.tan, cot=sympy.cot,
                 sec=sympy.sec, csc=sympy.csc, asin=sympy.asin, acos=sympy.acos, atan=sympy.atan, log=sympy.log,
                 exp=sympy.exp, pi=sympy.pi, oo=sympy.oo, binomial=sympy.binomial)
    transformations = standard_transformations + (implicit_multiplication_application, factorial_notation)
    try:
        raw = parse_expr(text, local_dict=local, transformations=transformations, evaluate=False)
        if not _small_enough(raw):
            return None
        expr = parse_expr(text, local_dict=local, transformations=transformations)
        return expr if isinstance(expr, sympy.Expr) else None
    except Exception:  # noqa: BLE001 - any parse failure means "not comparable", never "equal"
        return None


def _small_enough(expr: Any) -> bool:
    """False for powers or factorials that would take unbounded time to evaluate exactly."""
    import sympy  # heavy: loaded on first use

    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow) and node.exp.is_number:
            if node.exp.has(sympy.Pow, sympy.factorial) or abs(float(node.exp)) > MAX_EXPONENT:
                return False
        if isinstance(node, (sympy.factorial, sympy.binomial)) and any(
                a.is_number and abs(float(a)) > MAX_EXPONENT for a in node.args):
            return False
    return True


class _Timeout(BaseException):
    """Raised by the alarm; a BaseException so sympy's own ``except Exception`` cannot swallow it."""


@contextmanager
def _time_limit(seconds: float):
    """SIGALRM-based limit in the main thread (where the CLI and notebooks run); elsewhere no-op."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise _Timeout

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's alarm (e.g. a test timeout) was pending: put it back
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


def _limited(fn: Callable[[], bool], seconds: float) -> bool:
    """``fn()`` under a time limit; False on timeout or error. Off the main thread the work runs in a
    daemon thread that is abandoned (not killed) at the limit; the size guards bound what it can cost."""
    if threading.current_thread() is threading.main_thread():
        try:
            with _time_limit(seconds):
                return bool(fn())
        except (_Timeout, Exception):  # noqa: BLE001
            return False
    result: list[bool] = []
    worker = threading.Thread(target=lambda: result.append(_quiet(fn)), daemon=True)
    worker.start()
    worker.join(seconds)
    return bool(result and result[0])


def _quiet(fn: Callable[[], bool]) -> bool:
    try:
        return bool(fn())
    except Exception:  # noqa: BLE001
        return False


def sympy_equal(a: str, b: str) -> bool:
    """True when two normalised scalar answers are the same number or expression (exact, no tolerance
    beyond 1e-12 relative for irrational numbers that sympy cannot simplify to the same form)."""
    import sympy  # heavy: loaded on first use

    ea, eb = to_sympy(a), to_sympy(b)
    if ea is None or eb is None:
        return False
    if ea == eb:
        return True
    diff = sympy.simplify(ea - eb)
    if diff == 0:
        return True
    if diff.free_symbols or not (ea.is_number and eb.is_number) or ea.is_Rational and eb.is_Rational:
        return False
    va, vb = sympy.N(ea, 30), sympy.N(eb, 30)
    if not (va.is_finite and vb.is_finite):
        return False
    return bool(abs(va - vb) <= sympy.Float("1e-12", 30) * max(1, abs(vb)))


# ---------------------------------------------------------------- structures and the public check


def _split_top(s: str, sep: str = ",") -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(s):
        depth += (ch in "([{") - (ch in ")]}")
        if ch == sep and depth == 0:
            parts.append(s[start:i])
            start = i + 1
    return parts + [s[start:]]


def _structure(s: str) -> tuple[str, list[str]] | None:
    """(kind, items) for tuples, intervals, lists and matrices; None for a single value."""
    m = re.fullmatch(r"\\begin\{([pbvB]?matrix)\}(.*)\\end\{\1\}", s)
    if m:
        rows = [r.split("&") for r in m.group(2).split("\\\\") if r]
        return f"matrix{len(rows)}x{len(rows[0]) if rows else 0}", [e for r in rows for e in r]
    opener = "\\{" if s.startswith("\\{") and s.endswith("\\}") else s[:1]
    if opener in ("(", "[", "\\{") and s[-1:] in ")]}":
        inner = s[len(opener):-2 if opener == "\\{" else -1]
        items = _split_top(inner)
        if _braces_balanced(inner) and all(_parens_ok(i) for i in items) and (len(items) > 1 or opener == "\\{"):
            return opener + s[-1], items
    items = _split_top(s)
    return ("list", items) if len(items) > 1 else None


def _parens_ok(s: str) -> bool:
    depth = 0
    for ch in s:
        depth += (ch in "([") - (ch in ")]")
        if depth < 0:
            return False
    return depth == 0


def _scalar_equiv(a: str, b: str, timeout: float) -> bool:
    if a == b:
        return True
    if "=" in a or "=" in b:
        if a.count("=") == b.count("=") == 1:
            return all(_scalar_equiv(x, y, timeout) for x, y in zip(a.split("="), b.split("=")))
        return False
    return _limited(lambda: sympy_equal(a, b), timeout)


def is_equiv(prediction: str | None, gold: str | None, timeout: float = 2.0) -> bool:
    """Strict MATH equivalence of a predicted answer and the gold answer (both as extracted, LaTeX).

    Equal normalised strings are equal; otherwise tuples, intervals, sets and matrices compare item
    by item in order (their bracket kinds must match), and single values by ``sympy_equal`` within
    ``timeout`` seconds. A None or unnormalisable prediction is wrong.
    """
    p, g = normalize(prediction), normalize(gold)
    if p is None or g is None:
        return False
    if p == g:
        return True
    if "\\cup" in p or "\\cup" in g:
        ps, gs = p.split("\\cup"), g.split("\\cup")
        return len(ps) == len(gs) and all(is_equiv(x, y, timeout) for x, y in zip(ps, gs))
    sp, sg = _structure(p), _structure(g)
    if sp is None and sg is None:
        return _scalar_equiv(p, g, timeout)
    if sp is None or sg is None or sp[0] != sg[0] or len(sp[1]) != len(sg[1]):
        return False
    return all(is_equiv(x, y, timeout) for x, y in zip(sp[1], sg[1]))
