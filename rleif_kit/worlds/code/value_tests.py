"""Tests the evaluator can judge by value: ``assert candidate(<literals>) == <literal>`` and its close relatives.

Why: a verdict decided inside the candidate's process can be forged by the candidate (print the pass marker
and exit, an ``atexit`` hook, an object whose ``__eq__`` is always true, ``sys.settrace`` swapping the function
under test). When a test only compares return values with constants, none of that is needed: the sandboxed
program gets the arguments alone, serialises each return value to plain data (:func:`to_plain`, run in the
sandbox) and the evaluator compares them with the expected values it kept to itself (:func:`judge`). A
candidate can then pass only by returning the right values: nothing it can read holds them.

About two thirds of HumanEval's checks have this shape (measured: ``benchmarks/bench_humaneval.py`` prints how
many tasks were judged each way); the others run in-process with the hooks closed (``humaneval.py``).
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

PLAIN_SCALARS = (bool, int, float, str, type(None))


@dataclass(frozen=True)
class Case:
    """One call and what must hold of its result: ``op`` "==" (with ``tolerance`` for ``abs(r - x) < tol``),
    "is" (True / False / None), "truthy" or "falsy", or "rule": ``rule(case, result)`` decides (EvalPlus's
    comparison, ``evalplus.py``). Only ``args`` ever enters a program."""
    args: tuple
    op: str
    expected: Any = None
    tolerance: float = 0.0
    rule: Callable[["Case", Any], bool] | None = field(default=None, compare=False, repr=False)


class NotValueShaped(ValueError):
    """The test does more than compare return values with constants."""


_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
        ast.Pow: lambda a, b: a ** b}


def _literal(node: ast.AST) -> Any:
    """A literal, or constant arithmetic on literals (``3 * 19``, ``2.0 / 3.0``, ``'ab' + 'c'``), evaluated here
    by walking the tree (never ``eval``), with small operands so nothing can blow up."""
    try:
        return ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _literal(node.left), _literal(node.right)
        small = all(isinstance(x, (int, float)) and not isinstance(x, bool) and abs(x) < 1e6 or
                    isinstance(x, str) and len(x) < 1000 for x in (a, b))
        if small and not (isinstance(node.op, ast.Pow) and isinstance(b, int) and b > 64):
            try:
                return _OPS[type(node.op)](a, b)
            except (TypeError, ZeroDivisionError, OverflowError, ValueError):
                pass
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _literal(node.operand)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, (ast.Tuple, ast.List)):
        items = [_literal(e) for e in node.elts]
        return tuple(items) if isinstance(node, ast.Tuple) else items
    raise NotValueShaped(f"not a literal: {ast.unparse(node)[:60]}")


def _call_args(node: ast.AST, name: str) -> tuple | None:
    """The literal arguments of ``name(...)``; None when ``node`` is not such a call."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name):
        return None
    if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        raise NotValueShaped("keyword or starred arguments")
    return tuple(_literal(a) for a in node.args)


def _case(test: ast.AST, name: str) -> Case:
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, op, right = test.left, test.ops[0], test.comparators[0]
        if isinstance(op, (ast.Eq, ast.Is)):
            for call, other in ((left, right), (right, left)):
                args = _call_args(call, name)
                if args is not None:
                    value = _literal(other)
                    if isinstance(op, ast.Is) and value not in (True, False, None):
                        raise NotValueShaped("'is' against a value other than True, False, None")
                    return Case(args, "==" if isinstance(op, ast.Eq) else "is", value)
        if isinstance(op, ast.Lt) and isinstance(left, ast.Call) and isinstance(left.func, ast.Name) \
                and left.func.id in ("abs",) and len(left.args) == 1 and isinstance(left.args[0], ast.BinOp) \
                and isinstance(left.args[0].op, ast.Sub):
            args = _call_args(left.args[0].left, name)
            if args is not None:
                return Case(args, "==", _literal(left.args[0].right), float(_literal(right)))
    args = _call_args(test, name)
    if args is not None:
        return Case(args, "truthy")
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        args = _call_args(test.operand, name)
        if args is not None:
            return Case(args, "falsy")
    raise NotValueShaped(f"assert of another shape: {ast.unparse(test)[:60]}")


def value_cases(test_source: str, param: str = "candidate") -> list[Case]:
    """The cases of a HumanEval-style ``check(candidate)`` whose every statement is an assert on one call of
    ``candidate`` with literal arguments (or ``assert True``, a docstring, ``pass``); the module around it may
    only assign constants (``METADATA = {...}``) and define ``check``. Raises NotValueShaped otherwise."""
    try:
        module = ast.parse(test_source)
    except SyntaxError as e:
        raise NotValueShaped(f"test does not parse: {e}") from e
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    for node in module.body:
        if node in checks or isinstance(node, ast.Assign) and _is_constant(node.value) or _is_docstring(node):
            continue
        raise NotValueShaped(f"module-level statement: {ast.unparse(node)[:60]}")
    if len(checks) != 1 or [a.arg for a in checks[0].args.args] != [param]:
        raise NotValueShaped("no check(candidate)")
    cases = []
    for stmt in checks[0].body:
        if _is_docstring(stmt) or isinstance(stmt, ast.Pass) or _is_print(stmt):
            continue
        if not isinstance(stmt, ast.Assert):
            raise NotValueShaped(f"statement in check: {ast.unparse(stmt)[:60]}")
        if isinstance(stmt.test, ast.Constant) and stmt.test.value is True:
            continue
        cases.append(_case(stmt.test, param))
    if not cases:
        raise NotValueShaped("check calls the candidate nowhere")
    return cases


def _is_constant(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
        return True
    except (ValueError, SyntaxError, TypeError):
        return False


def _is_print(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and \
        isinstance(node.value.func, ast.Name) and node.value.func.id == "print"


def _is_docstring(node: ast.AST) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


# ------------------------------------------------------------------------------ plain data across the boundary

def to_plain(value, depth=0):
    """A JSON-able tagged copy of ``value`` built from plain data only: exact bool/int/float/complex/str/None,
    list/tuple/dict/set/frozenset/range of those, the ``collections`` containers ``Counter``, ``OrderedDict``,
    ``defaultdict`` and ``deque`` (as the tests compare them: a Counter equals a dict of the same counts), and an
    iterator (a generator, ``map``, ``filter``, ``zip``: its items, at most 100,000). Anything else (a subclass, an
    object with its own ``__eq__``) raises TypeError: it cannot cross to the evaluator. The evaluator compares
    only what it rebuilds (:func:`from_plain`), so no object of the candidate's takes part in a comparison. This
    function is copied into the sandboxed program (``PLAIN_SOURCE``)."""
    if depth > 100:
        raise TypeError("nested deeper than 100")
    kind = type(value)
    name = (getattr(kind, "__module__", ""), kind.__name__)
    if kind is float:
        return {"f": repr(value)}  # nan, inf and -0.0 survive
    if kind is complex:
        return {"complex": [repr(value.real), repr(value.imag)]}
    if kind in (bool, int, str, type(None)):
        return value
    if kind in (list, tuple, set, frozenset):
        items = [to_plain(v, depth + 1) for v in value]
        return {"list": items} if kind is list else {kind.__name__: items}
    if kind is range:
        return {"range": [value.start, value.stop, value.step]}
    if kind is dict or name in (("collections", "Counter"), ("collections", "OrderedDict"),
                                ("collections", "defaultdict")):
        pairs = [[to_plain(k, depth + 1), to_plain(v, depth + 1)] for k, v in dict.items(value)]
        return {"dict" if kind is dict else kind.__name__: pairs}
    if name == ("collections", "deque"):
        return {"deque": [to_plain(v, depth + 1) for v in list.__iter__(list(value))]}
    if name in (("builtins", "generator"), ("builtins", "map"), ("builtins", "filter"), ("builtins", "zip"),
                ("builtins", "enumerate"), ("builtins", "reversed"), ("builtins", "list_iterator"),
                ("builtins", "tuple_iterator"), ("builtins", "range_iterator"), ("itertools", "chain")):
        items = []
        for v in value:
            if len(items) >= 100000:
                raise TypeError("an iterator longer than 100,000 items")
            items.append(to_plain(v, depth + 1))
        return {"iter": items}
    raise TypeError(f"a {kind.__name__} is not plain data")


def check_hashes(items, most=8):
    """Raise ValueError when more than ``most`` different items share one hash: building a set or dict of them is
    quadratic (20,000 ints ``i * (2**61 - 1)``, all of hash 0, took 2.2 s; a million would take hours). Equal items
    (duplicates) cost nothing and pass. Linear: each item meets at most ``most`` others."""
    buckets = {}
    for x in items:
        same = buckets.setdefault(hash(x), [])
        if x not in same:
            if len(same) >= most:
                raise ValueError("too large to rebuild: more than %d different keys of one hash" % most)
            same.append(x)


def from_plain(data, budget=None, depth=0):
    """The value :func:`to_plain` encoded (built by the evaluator, so it holds no object of the candidate's), within
    bounds, so that what crosses cannot exhaust the evaluator that rebuilds it: at most 1,000,000 values in all
    (``budget``: [values left], shared by the calls of one crossing), a range counting its length (``range(10**9)``
    is 20 bytes of JSON, but a test's ``tuple(...)`` of it is 8 GB), nested at most 100 deep (as :func:`to_plain`),
    and no set or dict whose keys flood one hash (:func:`check_hashes`). Raises ValueError beyond them, with a
    message that starts "too large to rebuild"."""
    if budget is None:
        budget = [1000000]
    budget[0] -= 1
    if budget[0] < 0 or depth > 100:
        raise ValueError("too large to rebuild: " + ("more than 1,000,000 values" if budget[0] < 0 else
                                                     "nested deeper than 100"))
    if isinstance(data, (bool, int, str)) or data is None:
        return data
    if not (isinstance(data, dict) and len(data) == 1):
        raise ValueError(f"not an encoded value: {str(data)[:60]}")
    (tag, body), = data.items()
    if tag == "f":
        return float(body)
    if tag == "complex":
        return complex(float(body[0]), float(body[1]))
    if tag == "range":
        value = range(*(int(x) for x in body))
        try:
            budget[0] -= len(value)
        except OverflowError:  # longer than sys.maxsize
            budget[0] = -1
        if budget[0] < 0:
            raise ValueError("too large to rebuild: a range of more than 1,000,000 values")
        return value
    if tag in ("dict", "Counter", "OrderedDict", "defaultdict"):
        pairs = [(from_plain(k, budget, depth + 1), from_plain(v, budget, depth + 1)) for k, v in body]
        check_hashes(k for k, _ in pairs)
    elif tag in ("list", "tuple", "set", "frozenset", "deque", "iter"):
        items = [from_plain(v, budget, depth + 1) for v in body]
        if tag in ("set", "frozenset"):
            check_hashes(items)
    else:
        raise ValueError(f"not an encoded value: {str(data)[:60]}")
    if tag == "list":
        return items
    if tag in ("tuple", "set", "frozenset"):
        return {"tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)
    if tag == "iter":
        return iter(items)  # an iterator still: [..] == iterator is False, as in the test
    if tag == "dict":
        return dict(pairs)
    import collections  # the evaluator's own containers, rebuilt from plain data

    if tag == "deque":
        return collections.deque(items)
    return collections.defaultdict(None, pairs) if tag == "defaultdict" else getattr(collections, tag)(dict(pairs))


def judge(case: Case, got: Any) -> bool:
    """Does ``got`` (decoded by the evaluator) satisfy ``case``? Python's own ``==`` on plain values, as the test
    would have run it; ``abs(got - expected) < tolerance`` for the tolerance form."""
    try:
        if case.rule is not None:
            return bool(case.rule(case, got))
        if case.op == "is":
            return got is case.expected
        if case.op == "truthy":
            return bool(got)
        if case.op == "falsy":
            return not got
        if case.tolerance:
            return isinstance(got, (int, float)) and not isinstance(got, bool) and math.isfinite(got) and \
                abs(got - case.expected) < case.tolerance
        return bool(got == case.expected)
    except (TypeError, ValueError, OverflowError):
        return False


def judge_all(cases: Sequence[Case], results: Sequence[Any]) -> tuple[bool, str]:
    """(passed, reason) over every case: one result per case, each satisfied."""
    if len(results) != len(cases):
        return False, f"failed: {len(results)} results for {len(cases)} cases"
    for i, (case, result) in enumerate(zip(cases, results)):
        if "error" in result:
            return False, f"failed: case {i + 1} raised {str(result['error'])[:200]}"
        try:
            got = from_plain(result["value"])
        except (KeyError, ValueError, TypeError, RecursionError) as e:
            big = isinstance(e, ValueError) and str(e).startswith("too large")
            return False, f"failed: case {i + 1} returned " + (str(e)[:120] if big else "no plain value")
        if not judge(case, got):
            return False, f"failed: case {i + 1} returned a wrong value"
    return True, "passed"
