"""What a step of a program is, for a code PRM: a statement block, cut where the program's state is defined.

A math step ends at a sentence with a result ("Step 2: 8 * 3 = 24."); a program has no such markers, and a line
is the wrong unit (a statement may span lines; a blank line or a lone ``else:`` says nothing). So a step is

- one **top-level statement** of the code block (an import, an assignment, a class, a call), and
- inside a top-level function, one **statement of its body** (a loop or an ``if`` with everything under it is
  one step: its end is where the state it computes exists); the ``def`` line belongs to the first body step;
- a **comment line** that follows a statement starts a new step together with the statements below it, so a
  commented block ("# count the vowels" + its loop) is one step, as a person reading the solution splits it.

The **last step runs to the end of the response**: the text after the code block (an explanation) belongs to
it, as the math world's final answer line does, so the last label is read after the PRM has seen everything.
Code that does not parse falls back to one step per non-empty line of the block (at least two), and a response
with no code has no steps (the caller flags it). The split is over the code WizardCoder's post-processing cuts
out (the first ```python block, else the whole response), with offsets into the response itself.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from rleif_kit.worlds.steps import StepFormat

FENCE = re.compile(r"```python[^\n]*\n")


def code_span(response: str) -> tuple[int, int]:
    """(start, end) of the code in ``response``: the first ```python block's body, else the whole text."""
    m = FENCE.search(response)
    if m is None:
        return 0, len(response)
    close = response.find("\n```", m.end() - 1)
    return m.end(), close + 1 if close >= 0 else len(response)


def _line_starts(text: str) -> list[int]:
    starts, pos = [], 0
    for line in text.splitlines(keepends=True):
        starts.append(pos)
        pos += len(line)
    return starts + [pos]


def _statement_blocks(tree: ast.Module) -> list[tuple[int, int]]:
    """(first line, last line), 1-based and inclusive, of each step's statements."""
    blocks = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            body = node.body[1:] if _is_docstring(node.body[0]) and len(node.body) > 1 else node.body
            first = node.lineno if not node.decorator_list else node.decorator_list[0].lineno
            for j, stmt in enumerate(body):
                blocks.append((first if j == 0 else stmt.lineno, stmt.end_lineno or stmt.lineno))
        else:
            blocks.append((node.lineno, node.end_lineno or node.lineno))
    return blocks


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


@dataclass(frozen=True)
class CodeSteps(StepFormat):
    """The step split of a program (module docstring); ``segments`` are the steps' texts."""

    about = ("A step is one top-level statement of the code, or one statement of a function's body (a loop or an "
             "`if` with everything under it is one step; the `def` line belongs to the first); the last step runs "
             "to the end of the response, so its score sees the whole program.")

    def _code_ends(self, code: str) -> list[int]:
        lines = code.splitlines()
        starts = _line_starts(code)
        try:
            tree = ast.parse(code)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            ends = [starts[i] + len(line.rstrip()) for i, line in enumerate(lines) if line.strip()]
            return ends if len(ends) >= 2 else []
        # a step ends where its last statement ends; the comment lines above the next block fall into it
        return [starts[last - 1] + len(lines[last - 1].rstrip()) for _, last in _statement_blocks(tree)]

    def char_ends(self, solution: str) -> list[int]:
        start, end = code_span(solution)
        ends = [start + e for e in self._code_ends(solution[start:end])]
        if ends:
            ends[-1] = len(solution.rstrip())  # the explanation after the code belongs to the last step
        return ends

    def segments(self, solution: str) -> list[str]:
        ends = self.char_ends(solution)
        start = code_span(solution)[0]
        out = []
        for end in ends:
            out.append(solution[start:end].strip())
            start = end
        return out

    def well_formed(self, solution: str) -> bool:
        """rF for code: a code block (or bare code) that parses and defines a function."""
        start, end = code_span(solution)
        try:
            tree = ast.parse(solution[start:end])
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return False
        return any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in tree.body)


CODE_STEPS = CodeSteps()
