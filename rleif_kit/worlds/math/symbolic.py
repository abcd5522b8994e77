"""LaTeX answers to sympy, under a time limit: the exact comparison behind ``math_equiv.is_equiv``.

Why its own module: nothing a model writes may reach sympy's ``eval`` except plain arithmetic on symbols
(``latex_to_sympy`` whitelists), and nothing may run unbounded (size guards before evaluation, an alarm in
the main thread, an abandoned daemon thread elsewhere).

Numeric policy (``sympy_equal``): rationals compare exactly (a terminating decimal is its fraction, so 0.333
is not 1/3 and 3.14 is not pi); only when both sides are exact irrational numbers written without decimals
that sympy cannot simplify to the same form are they compared numerically, at 30 digits, with a relative
tolerance of 1e-12 (twelve significant digits). A decimal never stands for an irrational number, however many
digits it has (a 13-digit sqrt(2), a 15-digit pi, ``1.41421356237310\\pi``): an answer with a decimal compares
exactly or not at all. A rational number against an exact expression sympy cannot simplify is equal only when
the expression agrees with it to 50 digits and sympy does not know it to be irrational. Euler's ``e`` is
sympy's ``E`` (``2e - 1`` is 2e - 1, never the float 2e-1).
"""

from __future__ import annotations

import re
import signal
import threading
import time
from contextlib import contextmanager
from fractions import Fraction
from typing import Any, Callable

from rleif_kit.worlds.math.latex import rewrite_command

MAX_SYMPY_CHARS = 200  # longer answers are compared as strings only: simplify time grows fast
MAX_EXPONENT = 1000    # guards against 10^{10^{10}}-style inputs that no timer can interrupt


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
    t = rewrite_command(s, "\\frac", 2, lambda a, b, option: f"(({a})/({b}))")
    # a space before each name: "\\pi\\sqrt{2}" must not become "\\pisqrt(2)", which no rule below reads
    t = t and rewrite_command(t, "\\binom", 2, lambda a, b, option: f" binomial({a},{b})")
    t = t and rewrite_command(t, "\\sqrt", 1, lambda a, option: f" root({a},{option})" if option else f" sqrt({a})")
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
    t = re.sub(r"(?<=\d)(?=[a-zA-Z])", "*", t)  # "2e-1" is 2*e - 1: Python's tokenizer would read the float 0.2
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
    if "e" in local:  # a lone e is Euler's number (MATH writes e^2, 2e - 1, \\frac{e}{2}), not an unknown
        local["e"] = sympy.E
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

    def reciprocal_only(e: Any) -> bool:  # 1/3 parsed unevaluated is 1 * 3**-1: a power, but a harmless one
        return all(isinstance(p.base, sympy.Integer) and abs(p.base) < 10 ** 6 and p.exp == -1
                   for p in sympy.preorder_traversal(e) if isinstance(p, sympy.Pow))

    for node in sympy.preorder_traversal(expr):
        if isinstance(node, sympy.Pow) and node.exp.is_number:
            if node.exp.has(sympy.factorial) or not reciprocal_only(node.exp) or abs(float(node.exp)) > MAX_EXPONENT:
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
    if _DECIMAL.search(a) or _DECIMAL.search(b):  # a decimal is exactly its fraction: simplify has spoken
        return False
    if ea.is_Rational or eb.is_Rational:  # a rational against an expression simplify could not reduce to it
        other = eb if ea.is_Rational else ea
        return other.is_rational is not False and _close(ea, eb, 60, "1e-50")
    return _close(ea, eb, 30, "1e-12")


_DECIMAL = re.compile(r"\d\.\d")


def _close(ea: Any, eb: Any, digits: int, tolerance: str) -> bool:
    """|a - b| within ``tolerance`` relative (at least 1 absolute), both evaluated to ``digits`` digits."""
    import sympy  # heavy: loaded on first use

    va, vb = sympy.N(ea, digits), sympy.N(eb, digits)
    if not (va.is_finite and vb.is_finite):
        return False
    return bool(abs(va - vb) <= sympy.Float(tolerance, digits) * max(1, abs(vb)))
