"""What every config section shares: the range checks of its fields, then the rules across them (``sections.py``)."""

from __future__ import annotations

from dataclasses import fields


class _Section:
    def problems(self, cross: bool = True) -> list[tuple[str, str]]:
        """(key, what was expected) per out-of-range value; the rules across keys run only when every
        single value is fine (they would divide by a zero or repeat an error), and only when ``cross``."""
        out = []
        for f in fields(self):
            check = f.metadata.get("check")
            problem = check(getattr(self, f.name)) if check else None
            if problem:
                out.append((f.name, problem))
        if cross and not out:
            out.extend(self.cross_problems())
        return out

    def cross_problems(self) -> list[tuple[str, str]]:
        return []
