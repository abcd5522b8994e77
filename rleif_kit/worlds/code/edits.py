"""Counterfactual edits of a program, for the reward probes on code (the math world's edit answer lines).

A reward that reads what a program does must drop under an edit that breaks it and stay under one that keeps
its meaning. Each edit works on the first ```python block (or the whole text) and returns None when the
program does not admit it; the probe then leaves that pair out.

| edit | the reward must |
|---|---|
| ``off_by_one``: ``range(x, y + 1)`` written ``range(x, y)``, else the first integer constant k as k + 1 | drop |
| ``wrong_sign``: the first ``return x`` as ``return -(x)`` | drop |
| ``cut_code``: the last line of the code removed (a cut-off reply) | drop |
| ``rename``: the function's first parameter renamed everywhere | stay |
| ``comment``: a comment line above the first ``return`` | stay |
"""

from __future__ import annotations

import ast
import re
from typing import Callable

from rleif_kit.worlds.code.steps import code_span

Edit = Callable[[str], "str | None"]
RANGE_INCLUSIVE = re.compile(r"range\(([^()]*?),\s*([^()]*?)\s*\+\s*1\)")
CONSTANT = re.compile(r"(?<![\w.])(\d+)(?![\w.])")


def _in_code(solution: str, edit: Callable[[str], "str | None"]) -> str | None:
    start, end = code_span(solution)
    code = edit(solution[start:end])
    return None if code is None or code == solution[start:end] else solution[:start] + code + solution[end:]


def _off_by_one(code: str) -> str | None:
    if RANGE_INCLUSIVE.search(code):
        return RANGE_INCLUSIVE.sub(lambda m: f"range({m.group(1)}, {m.group(2)})", code, count=1)
    at = code.find("return ")
    m = CONSTANT.search(code, at if at >= 0 else 0)
    return None if m is None else code[:m.start()] + str(int(m.group(1)) + 1) + code[m.end():]


def _wrong_sign(code: str) -> str | None:
    m = re.search(r"return (.+)", code)
    return None if m is None else code[:m.start()] + f"return -({m.group(1).rstrip()})" + code[m.end():]


def _cut_code(code: str) -> str | None:
    lines = code.rstrip("\n").splitlines()
    return None if len(lines) < 2 else "\n".join(lines[:-1]) + "\n"


def _rename(code: str) -> str | None:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None
    fn = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.args.args), None)
    if fn is None:
        return None
    old = fn.args.args[0].arg
    new = old + "_value"
    if re.search(rf"\b{re.escape(new)}\b", code):
        return None
    return re.sub(rf"\b{re.escape(old)}\b", new, code)


def _comment(code: str) -> str | None:
    m = re.search(r"^([ \t]*)return ", code, flags=re.M)
    return None if m is None else code[:m.start()] + f"{m.group(1)}# the result\n" + code[m.start():]


CODE_EDITS: dict[str, tuple[Edit, str]] = {  # name -> (edit, the direction the reward must take)
    "off_by_one": (lambda s: _in_code(s, _off_by_one), "down"),
    "wrong_sign": (lambda s: _in_code(s, _wrong_sign), "down"),
    "cut_code": (lambda s: _in_code(s, _cut_code), "down"),
    "rename": (lambda s: _in_code(s, _rename), "same"),
    "comment": (lambda s: _in_code(s, _comment), "same"),
}
