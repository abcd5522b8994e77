"""Pure reward math, tested without a model.

The RLEIF reward is ``r = rI * rA``: the instruction reward model's score of the prompt times the
process reward model's aggregate score of the answer. ``[ppo].reward_formula`` lets a run change
that combination; the formula is parsed here into a plain function with a whitelist of syntax
(numbers, ``rI``, ``rA``, ``+ - * /``, unary minus, ``min``, ``max``, parentheses) so a config file can
never run arbitrary code.
"""

from __future__ import annotations

import ast
import operator
from typing import Callable

FORMULA_NAMES = ("rI", "rA")
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
            raise FormulaError(f"unknown name '{node.id}' (only rI and rA)")
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
    raise FormulaError(f"'{ast.unparse(node)}' is not allowed (numbers, rI, rA, + - * /, min, max, parentheses)")


def parse_reward_formula(text: str) -> Callable[[float, float], float]:
    """Compile ``text`` (e.g. ``"rI * rA"``) into ``f(rI, rA) -> float``; raise FormulaError if unsafe."""
    if not isinstance(text, str) or not text.strip():
        raise FormulaError("empty formula")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise FormulaError(f"not an expression: {e.msg}") from None
    body = _compile(tree.body)
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} - set(_FUNCS)
    if not used & set(FORMULA_NAMES):
        raise FormulaError("the formula uses neither rI nor rA")

    def reward(rI: float, rA: float) -> float:
        try:
            return float(body({"rI": rI, "rA": rA}))
        except ZeroDivisionError:
            return 0.0  # a division by a zero score means "no reward", never a crash mid-PPO
    return reward
