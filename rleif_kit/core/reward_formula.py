"""The reward formula r = f(rI, rA, rV, rF): parsed from the config into a plain function, tested without a model.

The RLEIF reward is ``r = rI * rA``: the instruction reward model's score of the prompt times the
process reward model's aggregate score of the answer. ``[ppo].reward_formula`` lets a run change
that combination and add the verifiable terms: ``rV``, the world's verifier on the response (gold-answer
match, the step verifier, unit tests), and ``rF``, the format term (steps and the answer line present) — e.g.
``"rI * rA * rV"`` or ``"rI * (0.5 * rA + 0.5 * rV)"``. The formula is parsed here into a plain function with a
whitelist of syntax (numbers, the four terms, ``+ - * /``, unary minus, ``min``, ``max``, parentheses) so a
config file can never run arbitrary code.

It sits in ``core`` because config validation parses the formula before any stage runs; what feeds it (rI, rA, rV,
rF for a rollout) is ``rewards/reward.py``.
"""

from __future__ import annotations

import ast
import operator
from typing import Callable

FORMULA_NAMES = ("rI", "rA", "rV", "rF")
MAX_FORMULA_NODES = 200  # a reward formula is a few terms; thousands are a typo or an attack, not a recipe
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_FUNCS = {"min": min, "max": max}


class FormulaError(ValueError):
    """A reward formula uses something outside the whitelist."""


def _compile(node: ast.AST) -> Callable[[dict[str, float]], float]:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = float(node.value)
        return lambda env: value
    if isinstance(node, ast.Name):
        if node.id not in FORMULA_NAMES:
            raise FormulaError(f"unknown name '{node.id}' (only rI, rA, rV and rF)")
        name = node.id
        return lambda env: env[name]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        op, left, right = _BINARY[type(node.op)], _compile(node.left), _compile(node.right)
        return lambda env: op(left(env), right(env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner, sign = _compile(node.operand), -1.0 if isinstance(node.op, ast.USub) else 1.0
        return lambda env: sign * inner(env)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS:
        if node.keywords or len(node.args) < 2:
            raise FormulaError(f"{node.func.id}() takes two or more plain arguments")
        func, args = _FUNCS[node.func.id], [_compile(a) for a in node.args]
        return lambda env: func(a(env) for a in args)
    raise FormulaError(f"'{ast.unparse(node)}' is not allowed (numbers, rI, rA, rV, rF, + - * /, min, max, "
                       "parentheses)")


class Formula:
    """A compiled reward formula: ``formula(rI, rA, rV=0, rF=0) -> float``; ``terms`` the names it uses."""

    def __init__(self, text: str, body: Callable[[dict[str, float]], float], terms: frozenset[str]):
        self.text, self._body, self.terms = text, body, terms

    def __call__(self, rI: float = 0.0, rA: float = 0.0, rV: float = 0.0, rF: float = 0.0) -> float:
        try:
            return float(self._body({"rI": rI, "rA": rA, "rV": rV, "rF": rF}))
        except ZeroDivisionError:
            return 0.0  # a division by a zero score means "no reward", never a crash mid-PPO


def parse_reward_formula(text: str) -> Formula:
    """Compile ``text`` (e.g. ``"rI * rA"``) into ``f(rI, rA, rV, rF) -> float``; raise FormulaError if unsafe."""
    if not isinstance(text, str) or not text.strip():
        raise FormulaError("empty formula")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"not an expression: {e.msg}") from None
    except (RecursionError, MemoryError):  # the parser's own depth limit
        raise FormulaError(f"too deeply nested to be a reward formula ({len(text)} characters)") from None
    nodes = sum(isinstance(n, ast.expr) for n in ast.walk(tree))  # numbers, names, operations, calls
    if nodes > MAX_FORMULA_NODES:  # compiled and evaluated recursively: bounded before either recurses
        raise FormulaError(f"{nodes} parts; a reward formula has at most {MAX_FORMULA_NODES}")
    body = _compile(tree.body)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS)
    if not used & set(FORMULA_NAMES):
        raise FormulaError("the formula uses none of rI, rA, rV, rF")
    return Formula(text.strip(), body, frozenset(used & set(FORMULA_NAMES)))
