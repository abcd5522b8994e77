"""LaTeX text primitives shared by the MATH checker: balanced braces, command arguments, top-level splits.

Why apart: the normaliser (``math_equiv``), the sympy converter (``math_sympy``) and the answer styles
(``answer_styles``) all read LaTeX the same way; one reader means one set of bugs.
"""

from __future__ import annotations

from typing import Callable


def braces_balanced(s: str) -> bool:
    """Every ``}`` closes an earlier ``{`` and every ``{`` is closed."""
    depth = 0
    for ch in s:
        depth += (ch == "{") - (ch == "}")
        if depth < 0:
            return False
    return depth == 0


def read_arg(s: str, i: int) -> tuple[str, int] | None:
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


def rewrite_command(s: str, name: str, nargs: int, fmt: Callable[..., str]) -> str | None:
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
            arg = read_arg(s, k)
            if arg is None:
                return None
            inner = rewrite_command(arg[0], name, nargs, fmt)
            if inner is None:
                return None
            args.append(inner)
            k = arg[1]
        out.append(fmt(*args, option=option))
        i = k
    return "".join(out) + s[i:]


def split_top(s: str, sep: str = ",") -> list[str]:
    """``s`` split at every ``sep`` outside brackets and braces (``sep`` may be a word such as ``\\cup``)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    return parts + [s[start:]]
