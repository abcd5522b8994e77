"""The report's markup: Jinja2 templates with autoescaping on, so a value reaches the page only as text.

A report shows what models, users and files wrote — completions, judge replies, a stage's error, config values, a
check's advice, the run's name. Built by hand, each needed its own escape call, and one missed call put that text
into the page as HTML. Here every value goes through a template's ``{{ }}``, which escapes it, and the result is
``Markup``: HTML the kit built itself from escaped parts, which the next template takes as it is (a pill inside a
table cell is escaped once, not twice). A plain ``str`` is always text. Templates are constant strings the kit
writes; no value ever becomes part of a template's source, so ``{{ 7*7 }}`` in a completion is shown as typed.

The page's frame is ``templates/report.html.j2`` (package data); each part of it is a small template string beside
the code that picks its values (``report.py``, ``report_sections.py``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

from jinja2 import Environment, PackageLoader, StrictUndefined, Template
from markupsafe import Markup

ENV = Environment(loader=PackageLoader("rleif_kit.pipeline", "templates"), autoescape=True,
                  undefined=StrictUndefined, keep_trailing_newline=True)


@lru_cache(maxsize=None)
def _template(source: str) -> Template:
    return ENV.from_string(source)


def render(source: str, **values: Any) -> Markup:
    """A template string rendered with ``values``: each escaped where it is not ``Markup`` already."""
    return Markup(_template(source).render(**values))


def render_file(template: str, **values: Any) -> str:
    """A template of ``templates/`` (package data) rendered with ``values``, escaped the same way."""
    return ENV.get_template(template).render(**values)


def join(parts: Iterable[Any], sep: str = "") -> Markup:
    """Parts joined with ``sep`` (markup the kit wrote): a part that is not ``Markup`` is escaped, as ``{{ }}``
    would."""
    return Markup(sep).join(parts)
