"""The notebooks' looks at the data: a table of records with its long texts wrapped, or a short note.

Every stage's view (``evolve/lineages.py``, ``dedup/groups.py``, ``rewards/examples.py``, ``ppo/stage.py``,
``checks/verdict_table.py``) builds plain rows and hands them here, so the tables look alike and the views
hold only the choice of what to show. A view returns a pandas ``Styler`` — its ``.data`` is the DataFrame the
tests compare — or a :class:`Note` when the stage left nothing to show: a run where a stage made nothing
gets one line saying so, never a traceback.

pandas' plain DataFrame display cuts every cell at 50 characters, which hides the instructions and
solutions these tables exist to show; the Styler does not cut, and wraps the text columns instead.
"""

from __future__ import annotations

import html
from typing import Any, Callable, Sequence

WRAP_WIDTH = "42em"  # a text column this wide holds a ~90-character line: a short problem in two or three lines


class Note(str):
    """What a view returns instead of a table: one line that says what is missing and which stage makes it.
    It shows without quotes in a notebook, in text and HTML alike."""

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        return f"<p><em>{html.escape(self)}</em></p>"


def missing(path: Any, stage: str, what: str) -> Note:
    """The note for a view whose file does not exist (yet): names what is missing, the file and its stage."""
    return Note(f"No {what} to show: {path} does not exist yet (written by {stage}).")


def text_table(rows: Sequence[dict], wrap: Sequence[str] = (), digits: int = 3, caption: str = "",
               cell_colour: Callable[[Any], str] | None = None, colour_columns: Sequence[str] = (),
               gradient: Sequence[str] = (), code: Sequence[str] = ()) -> Any:
    """A Styler of ``rows`` (one dict per row, the keys in column order): index hidden, ``wrap`` columns
    left-aligned and wrapped at :data:`WRAP_WIDTH` (their line breaks kept), floats to ``digits`` places,
    None shown as a dash, every text HTML-escaped. ``cell_colour(value) -> CSS`` colours ``colour_columns`` (a
    status, say); ``gradient`` columns get a red-to-green background over [0, 1] (a score); ``code`` columns (a
    program: ``RunWords.code_language`` is set) are shown as code, monospace with every space and line break kept,
    never cut."""
    import pandas as pd  # heavy: loaded on first use (the trainer imports the rollout writer beside its view)

    frame = pd.DataFrame(list(rows))
    style = (frame.style.hide(axis="index").format(precision=digits, na_rep="—", escape="html")
             .set_table_styles([{"selector": "th", "props": "text-align: left; vertical-align: bottom"},
                                {"selector": "td", "props": "text-align: left; vertical-align: top"}]))
    if frame.empty:
        return style
    texts = [c for c in wrap if c in frame.columns]
    if texts:
        style = style.set_properties(subset=texts, **{"white-space": "pre-wrap", "min-width": "18em",
                                                      "max-width": WRAP_WIDTH})
    programs = [c for c in code if c in frame.columns]
    if programs:  # indentation is a program's syntax: kept, in a monospace font; long lines wrap, nothing is cut
        style = style.set_properties(subset=programs, **{"white-space": "pre-wrap", "font-family": "monospace",
                                                         "min-width": "18em", "max-width": WRAP_WIDTH})
    if cell_colour is not None and colour_columns:
        style = style.map(cell_colour, subset=list(colour_columns))
    if gradient:
        style = style.background_gradient(cmap="RdYlGn", vmin=0.0, vmax=1.0, subset=list(gradient))
    style = style.format_index(escape="html", axis=1)  # a column's name may be data (a model's, a family's)
    return style.set_caption(html.escape(caption, quote=False)) if caption else style  # captions quote data


def count_table(counts: dict[str, dict[str, int]]) -> Any:
    """Counts per key (an operator, a round) and kind (kept, eliminated, removed): one row per key, one column per
    kind, a kind a key never had counted 0 — the numbers behind ``core/plots.plot_counts``, 01's and 02's alike."""
    import pandas as pd  # heavy: loaded on first use (a stage run from the shell shows no table)

    return pd.DataFrame(counts).T.fillna(0).astype(int)
