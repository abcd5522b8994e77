"""One progress line per interval, for the terminal of ``rleif run``: ``[03_sft] step 120/500 · loss 0.834 · ETA 3m02s``.

A notebook's tqdm bars are widgets (or carriage-return redraws) that never reach a terminal as lines, so the long
loops (SFT, the reward models, PPO) also print these plain lines when ``rleif run`` asks for them: the runner sets
``RLEIF_PROGRESS_LINES=1`` for the notebook kernels it starts, streams every line matching ``LINE`` to the terminal
and keeps the whole stage output in ``reports/<run>/logs/NN_stage.log``. In JupyterLab (the variable unset) the
bars alone show progress.
"""

from __future__ import annotations

import os
import re
import sys
import time
from typing import Any, Callable

ENV = "RLEIF_PROGRESS_LINES"
# what the runner streams to the terminal (searched, not matched: a tqdm redraw may sit before it on the line)
LINE = re.compile(r"\[0\d_[a-z_]+(?: [^\]]+)?\] (step|item|round) ")


def wanted() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def fmt_duration(seconds: float) -> str:
    """``3m02s``, ``1h05m``, ``45s``."""
    seconds = max(0, int(round(seconds)))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


class ProgressLines:
    """``update(step, loss=..)`` prints ``[label] step k/total · loss .. · ETA ..`` at most every ``every_s``
    seconds, and always for the last step; silent unless ``enabled`` (default: when ``rleif run`` asks)."""

    def __init__(self, label: str, total: int, start: int = 0, every_s: float = 10.0, unit: str = "step",
                 enabled: bool | None = None, clock: Callable[[], float] = time.monotonic, stream=None):
        self.label, self.total, self.start, self.every_s, self.unit = label, total, start, every_s, unit
        self.enabled = wanted() if enabled is None else enabled
        self.clock, self.stream = clock, stream
        self.t0 = clock()
        self.last: float | None = None

    def line(self, step: int, figures: dict[str, Any]) -> str:
        """The text of one line; the ETA from the pace since this object was made (a resumed run counts from
        ``start``)."""
        parts = [f"[{self.label}] {self.unit} {step}/{self.total}"]
        parts += [f"{k} {_fmt(v)}" for k, v in figures.items() if v is not None]
        done = step - self.start
        if 0 < done and step < self.total:
            parts.append("ETA " + fmt_duration((self.clock() - self.t0) / done * (self.total - step)))
        elif step >= self.total:
            parts.append("done in " + fmt_duration(self.clock() - self.t0))
        return " · ".join(parts)

    def update(self, step: int, **figures: Any) -> str | None:
        if not self.enabled:
            return None
        now = self.clock()
        if step < self.total and self.last is not None and now - self.last < self.every_s:
            return None
        self.last = now
        text = self.line(step, figures)
        print(text, file=self.stream or sys.stdout, flush=True)
        return text


class Bar:
    """A tqdm bar that also prints progress lines (``[label] item n/total · ... · ETA``) when ``rleif run`` asks:
    the bar for JupyterLab, the lines for the terminal. ``update``, ``set_postfix`` and ``close`` as tqdm's."""

    def __init__(self, total: int, desc: str, label: str, initial: int = 0, disable: bool = False,
                 unit: str = "it", **tqdm_kwargs: Any):
        from tqdm.auto import tqdm  # heavy: loaded on first use

        self.bar = tqdm(total=total, initial=initial, desc=desc, disable=disable, unit=unit, **tqdm_kwargs)
        self.lines = ProgressLines(f"{label} {desc.split()[0].lower()}" if desc else label, total, start=initial,
                                   unit="item", enabled=None if not disable else False)
        self.n, self.figures = initial, {}

    def update(self, n: int = 1) -> None:
        self.bar.update(n)
        self.n += n
        self.lines.update(self.n, **self.figures)

    def set_postfix(self, ordered_dict: dict | None = None, refresh: bool = True, **kwargs: Any) -> None:
        self.figures = {**(ordered_dict or {}), **kwargs}
        self.bar.set_postfix(self.figures, refresh=refresh)

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self.bar.set_postfix_str(text, refresh=refresh)

    def close(self) -> None:
        self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
