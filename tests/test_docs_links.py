"""The README is an entrance and the docs hold together: the README stays short, every relative link (and image,
and #anchor) in README.md and docs/**/*.md resolves, and every docs page can be reached from the README.

Pure file reading, no network: http(s) links are not followed.
"""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ROOT

README_MAX_LINES = 250
# Links allowed to point at nothing (none: docs/images/report-headline.png is a real run's report, cropped)
PENDING: set[Path] = set()

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.DOTALL | re.MULTILINE)
INLINE_CODE = re.compile(r"(`+).+?\1")
LINK = re.compile(r"(!?)\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code, where brackets are not links."""
    return INLINE_CODE.sub("", FENCE.sub("", text))


def markdown_links(text: str) -> list[tuple[str, bool]]:
    """(target, is_image) of every markdown link and image outside code."""
    return [(m.group(2), m.group(1) == "!") for m in LINK.finditer(_prose(text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a page (a repeated heading gets -1, -2, ... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(FENCE.sub("", text)):
        s = slug(m.group(1))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def broken_links(root: Path, files: list[Path], pending: set[Path] = frozenset()) -> list[str]:
    """'file: target (why)' for each relative link whose file or #anchor does not exist. ``pending``: paths
    (relative to ``root``) allowed to be missing."""
    problems = []
    for page in files:
        for target, _ in markdown_links(page.read_text(encoding="utf-8")):
            if SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page.resolve()
            where = f"{page.relative_to(root)}: {target}"
            if not dest.exists():
                try:
                    if dest.relative_to(root.resolve()) in pending:
                        continue
                except ValueError:
                    pass
                problems.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
                problems.append(f"{where} (no heading #{anchor})")
    return problems


def reachable(start: Path) -> set[Path]:
    """Every markdown page reached from ``start`` by following relative links (the start included)."""
    seen, todo = set(), [start.resolve()]
    while todo:
        page = todo.pop()
        if page in seen or not page.exists():
            continue
        seen.add(page)
        for target, is_image in markdown_links(page.read_text(encoding="utf-8")):
            path_part = target.partition("#")[0]
            if not is_image and path_part.endswith(".md") and not SCHEME.match(target):
                todo.append((page.parent / path_part).resolve())
    return seen


def doc_pages(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


# ------------------------------------------------------------------------------ the repository's docs

def test_readme_is_an_entrance_under_250_lines():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_every_relative_link_and_image_resolves():
    assert broken_links(ROOT, doc_pages(ROOT), PENDING) == []


def test_every_docs_page_is_reachable_from_the_readme():
    seen = reachable(ROOT / "README.md")
    orphans = [str(p.relative_to(ROOT)) for p in doc_pages(ROOT) if p.resolve() not in seen]
    assert orphans == [], "link these pages from README.md (or a page it reaches)"


def test_readme_shows_the_report_headline_image():
    images = [t for t, is_image in markdown_links((ROOT / "README.md").read_text(encoding="utf-8")) if is_image]
    assert "docs/images/report-headline.png" in images


def test_the_config_reference_lives_in_docs_configuration():
    assert "<!-- config-table:start -->" in (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert "<!-- config-table:start -->" not in (ROOT / "README.md").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ the checker itself, on a tmp dir

def _site(tmp_path: Path, readme: str, pages: dict[str, str]) -> Path:
    (tmp_path / "README.md").write_text(readme)
    for name, text in pages.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_broken_link_anchor_or_image_is_caught(tmp_path):
    root = _site(tmp_path, "[a](docs/a.md) [gone](docs/gone.md) ![img](docs/images/x.png) [web](https://example.org/x.md)",
                 {"docs/a.md": "# A page\n\n## Part two: `x.y`\n\n[back](../README.md#top) [ok](#part-two-xy)\n"
                               "[bad anchor](#part-three)\n\n```\n[in code](nowhere.md)\n```\n`[inline](nowhere.md)`\n"})
    (root / "README.md").write_text((root / "README.md").read_text() + "\n# Top\n")
    problems = broken_links(root, doc_pages(root))
    assert problems == ["README.md: docs/gone.md (no such file)", "README.md: docs/images/x.png (no such file)",
                        "docs/a.md: #part-three (no heading #part-three)"]  # code blocks and https are not links
    assert broken_links(root, doc_pages(root), {Path("docs/images/x.png"), Path("docs/gone.md")}) == [
        "docs/a.md: #part-three (no heading #part-three)"]


def test_an_orphan_page_is_not_reachable(tmp_path):
    root = _site(tmp_path, "[a](docs/a.md)", {"docs/a.md": "[b](sub/b.md#x)", "docs/sub/b.md": "# x\n",
                                              "docs/orphan.md": "[a](a.md)"})
    seen = reachable(root / "README.md")
    assert {p.relative_to(root.resolve()).as_posix() for p in seen} == {"README.md", "docs/a.md", "docs/sub/b.md"}


def test_slugs_follow_github():
    assert slug("Endpoint settings: `settings.json`") == "endpoint-settings-settingsjson"
    assert slug("Why the preset's reward is the verifier") == "why-the-presets-reward-is-the-verifier"
    assert slug("2. Data") == "2-data"
    assert anchors("# Notes\n## Notes\n```\n# not a heading\n```\n") == {"notes", "notes-1"}
