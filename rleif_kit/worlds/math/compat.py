"""WizardMath's published MATH scorer, reproduced so a report can show it beside the strict one
(``math_equiv.is_equiv``): the MATH repo's string normalisation plus a ``math_equal`` that accepts x100
and /100 and 1e-4 closeness, and that counts an answer as right whenever its normalisation raises (e.g.
any ``x/2``). Its sympy step uses ``math_equiv``'s safe converter under the same time limit.
"""

from __future__ import annotations

from math import isclose
from typing import Any

from rleif_kit.worlds.math.equiv import _limited, normalize, to_sympy


def _compat_strip(s: str) -> str:
    """The MATH repo's ``_strip_string`` as WizardMath uses it (raises where the original raises)."""
    s = s.replace("\n", "").replace("\\!", "").replace("\\\\", "\\").replace("tfrac", "frac").replace("dfrac", "frac")
    for old in ("\\left", "\\right", "^{\\circ}", "^\\circ", "\\$"):
        s = s.replace(old, "")
    if "\\text{ " in s:
        pieces = s.split("\\text{ ")
        if len(pieces) != 2:
            raise ValueError("two unit texts")  # the original asserts here
        s = pieces[0]
    s = s.replace("\\%", "").replace(" .", " 0.").replace("{.", "{0.")
    if not s:
        return s
    if s[0] == ".":
        s = "0" + s
    if len(s.split("=")) == 2 and len(s.split("=")[0]) <= 2:
        s = s.split("=")[1]
    head, *rest = s.split("\\sqrt")
    s = head + "".join("\\sqrt" + (p if p[0] == "{" else "{" + p[0] + "}" + p[1:]) for p in rest)
    s = s.replace(" ", "")
    s = _compat_fix_fracs(s)
    if s == "0.5":
        s = "\\frac{1}{2}"
    if len(s.split("/")) == 2:
        a, b = s.split("/")
        a, b = int(a), int(b)  # a ValueError escapes, as in the original
        if s == f"{a}/{b}":
            s = f"\\frac{{{a}}}{{{b}}}"
    return s


def _compat_fix_fracs(s: str) -> str:
    head, *rest = s.split("\\frac")
    out = head
    for p in rest:
        out += "\\frac"
        if p[0] == "{":
            out += p
        elif len(p) < 2:
            return s
        elif p[1] != "{":
            out += "{" + p[0] + "}{" + p[1] + "}" + p[2:]
        else:
            out += "{" + p[0] + "}" + p[1:]
    return out


def _compat_is_digit(s: Any) -> bool:
    try:
        float(str(s).replace(",", ""))
        return True
    except ValueError:
        return False


def _compat_math_equal(pred: str, ref: str) -> bool:
    """WizardMath's ``grader.math_equal``: x100 and /100 accepted, 1e-4 closeness, brackets ignored."""
    if _compat_is_digit(pred) and _compat_is_digit(ref):
        p, r = float(str(pred).replace(",", "")), float(str(ref).replace(",", ""))
        return any(isclose(x, p, rel_tol=1e-4) for x in (r / 100, r, r * 100))
    if not pred:
        return False
    pred, ref = str(pred).strip(), str(ref).strip()
    ps, rs = pred, ref
    if (pred[:1] + pred[-1:] == "[]" and ref[:1] != "(") or (pred[:1] + pred[-1:] == "()" and ref[:1] != "["):
        ps, rs = ps.strip("[]()"), rs.strip("[]()")
    for ch in "{}()":
        ps, rs = ps.replace(ch, ""), rs.replace(ch, "")
    if ps == rs:
        return True
    if (pred[:1] + pred[-1:] == ref[:1] + ref[-1:]) and pred[:1] + pred[-1:] in ("[]", "()"):
        pp, rp = pred[1:-1].split(","), ref[1:-1].split(",")
        if len(pp) == len(rp) and all(_compat_math_equal(x, y) for x, y in zip(pp, rp)):
            return True
    return _limited(lambda: _compat_symbolic_equal(pred, ref), 2.0)


def _compat_symbolic_equal(a: str, b: str) -> bool:
    import sympy  # heavy: loaded on first use

    ea, eb = to_sympy(normalize(a) or a), to_sympy(normalize(b) or b)
    if ea is None or eb is None:
        return False
    if sympy.simplify(ea - eb) == 0:
        return True
    return isclose(complex(sympy.N(ea)).real, complex(sympy.N(eb)).real, rel_tol=1e-3) and \
        isclose(complex(sympy.N(ea)).imag, complex(sympy.N(eb)).imag, rel_tol=1e-3)


MATH_VERSIONS = ("math-equal-09b6403", "math-equal-cd6a0e6", "strings-96dae6b")
GSM8K_VERSIONS = ("round-96dae6b", "math-equal-f45fc86")


def compat_is_equiv(prediction: str | None, gold: str | None, version: str = "math-equal-09b6403") -> bool:
    """WizardMath's MATH ``is_equiv`` (inference/util.py + grader.py), reproduced to show its looseness.

    ``version`` names the util.py commit of nlpxucan/WizardLM it follows:
    - ``math-equal-09b6403`` (the default): ``math_equal(a, b) or a == b`` on the stripped strings, and when
      the stripping raises, ``math_equal(pred, pred)`` — so a normalisation error counts as correct
      (``x/2`` against ``7`` is "right");
    - ``math-equal-cd6a0e6``: the same with that slip fixed (``math_equal(pred, gold)``);
    - ``strings-96dae6b`` (the first release): the stripped strings must be equal, nothing else.
    Its sympy step uses this module's safe converter where the original used ``parse_latex``/``parse_expr``.
    """
    if version not in MATH_VERSIONS:
        raise ValueError(f"unknown MATH compat scorer {version!r}; expected one of {MATH_VERSIONS}")
    if prediction is None or gold is None:
        return prediction is None and gold is None
    try:
        a, b = _compat_strip(prediction), _compat_strip(gold)
        return a == b if version == "strings-96dae6b" else _compat_math_equal(a, b) or a == b
    except Exception:  # noqa: BLE001 - the published scorer compares the prediction with itself here
        if version == "strings-96dae6b":
            return prediction == gold
        other = prediction if version == "math-equal-09b6403" else gold
        return _compat_math_equal(prediction, other) or prediction == gold


def compat_gsm8k_equal(rounded: int | None, gold: float, version: str = "round-96dae6b") -> bool:
    """WizardMath's GSM8k comparison of the rounded prediction with the gold (gsm8k_inference.py):
    ``round-96dae6b`` (the first release, also 01f17bf): ``float(pred) == float(gold)``;
    ``math-equal-f45fc86``: that, or ``grader.math_equal(pred, gold)``, which accepts the gold x100 or /100
    and a relative error of 1e-4."""
    if version not in GSM8K_VERSIONS:
        raise ValueError(f"unknown GSM8k compat scorer {version!r}; expected one of {GSM8K_VERSIONS}")
    if rounded is None:
        return False
    return float(rounded) == float(gold) or version == "math-equal-f45fc86" and _compat_math_equal(str(rounded),
                                                                                                    str(gold))
