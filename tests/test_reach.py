"""tools/reach.py on hand-made tiny packages under tmp_path: what a root reaches, and the lines it counts.

Each package is ``kit`` with subpackages ``p`` (the roots), ``q`` (what they call) and ``r`` (never reached); the
line numbers of every file are written beside it, and the expected counts beside the assertions.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parent.parent / "tools" / "reach.py"
_spec = importlib.util.spec_from_file_location("reach_tool", TOOL)
reach = sys.modules.setdefault("reach_tool", importlib.util.module_from_spec(_spec))  # dataclasses look it up
_spec.loader.exec_module(reach)

NEVER = """\
from kit.q.b import helper


def never():
    return helper()
"""


def _package(root: Path, files: dict[str, str]) -> None:
    for rel, text in {"r/never.py": NEVER, **files}.items():
        path = root / "kit" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [root / "kit", *(p for p in (root / "kit").rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()


def _report(root: Path, files: dict[str, str], *roots: str) -> dict:
    _package(root, files)
    return reach.Index(root, "kit").report(list(roots))


def _rows(report: dict) -> dict[str, tuple[int, int]]:
    """path -> (the module's lines, the reached lines in it)."""
    return {r["path"]: (r["lines"], r["reached_lines"]) for r in report["modules"]}


def _defs(report: dict) -> dict[str, list[str]]:
    return {r["path"]: r["definitions"] for r in report["modules"]}


B = """\
def helper():
    return 1


def unused():
    return 2
"""  # 1-2 helper, 5-6 unused: 6 lines


def test_direct_call_and_an_unreached_module(tmp_path):
    a = """\
from kit.q.b import helper


def root():
    return helper()
"""  # 4-5 root: 5 lines
    report = _report(tmp_path, {"p/a.py": a, "q/b.py": B}, "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (5, 2),  # root 4-5: 2
                             "kit/q/b.py": (6, 2)}  # helper 1-2: 2 (unused left out)
    assert "kit/r/never.py" not in _rows(report)  # it calls helper, but nothing reaches it
    assert _defs(report)["kit/q/b.py"] == ["helper"]
    assert report["totals"] == {"files": 2, "lines": 11,  # 5 + 6 = 11
                                "reached_lines": 4,  # 2 + 2 = 4
                                "packages": 2}  # p, q


def test_calls_through_module_aliases(tmp_path):
    a = """\
import kit.q.c as cm
import kit.q.d
from kit.q import b


def root():
    b.helper()
    cm.other()
    return kit.q.d.third()
"""  # 6-9 root: 9 lines
    c = "def other():\n    return 3\n"  # 1-2
    d = "def third():\n    return 4\n"  # 1-2
    report = _report(tmp_path, {"p/a.py": a, "q/b.py": B, "q/c.py": c, "q/d.py": d}, "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (9, 4),  # root 6-9: 4
                             "kit/q/b.py": (6, 2),  # helper 1-2: 2
                             "kit/q/c.py": (2, 2),  # other 1-2: 2
                             "kit/q/d.py": (2, 2)}  # third 1-2: 2
    assert report["totals"]["lines"] == 19  # 9 + 6 + 2 + 2 = 19
    assert report["totals"]["reached_lines"] == 10  # 4 + 2 + 2 + 2 = 10


def test_a_re_export_resolves_to_its_definition(tmp_path):
    a = """\
from kit.p.mid import shared as s


def root():
    return s()
"""  # 4-5 root: 5 lines
    mid = "from kit.q import shared\n"  # a re-export of a re-export
    q_init = "from .impl import shared  # the public name\n"  # kit/q/__init__.py, a relative import
    impl = "def shared():\n    return 5\n"  # 1-2
    report = _report(tmp_path, {"p/a.py": a, "p/mid.py": mid, "q/__init__.py": q_init, "q/impl.py": impl},
                     "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (5, 2),  # root 4-5: 2
                             "kit/q/impl.py": (2, 2)}  # shared 1-2: 2; mid.py and q/__init__.py define nothing
    assert report["totals"]["reached_lines"] == 4  # 2 + 2 = 4


def test_a_method_on_self(tmp_path):
    a = """\
class Base:
    def shared(self):
        return 0


class Runner(Base):
    \"\"\"Runs.\"\"\"

    def run(self):
        return self._step(), Other()

    def _step(self):
        return self.shared()

    def unused(self):
        return 2


class Other:
    def _step(self):
        return 1
"""  # 1-3 Base (2-3 shared); 6-16 Runner (9-10 run, 12-13 _step, 15-16 unused); 19-21 Other (20-21 _step): 21 lines
    report = _report(tmp_path, {"p/a.py": a}, "kit.p.a.Runner.run")
    # Runner less its methods {6, 7, 8, 11, 14} 5 + run 2 + _step 2 + Base {1} 1 + shared 2 + Other {19} 1 = 13
    assert _rows(report) == {"kit/p/a.py": (21, 13)}
    # self._step is Runner's own, not Other's (Other is reached too); self.shared is inherited from Base
    assert _defs(report)["kit/p/a.py"] == ["Base", "Base.shared", "Other", "Runner", "Runner._step", "Runner.run"]


def test_a_method_on_an_unknown_receiver_of_a_reached_class(tmp_path):
    a = """\
from kit.q.b import make


def root():
    thing = make()
    return thing.go()
"""  # 4-6 root: 6 lines
    b = """\
class Thing:
    def go(self):
        return 1

    def stay(self):
        return 2


def make():
    return Thing()
"""  # 1-6 Thing; 2-3 go, 5-6 stay; 9-10 make: 10 lines
    report = _report(tmp_path, {"p/a.py": a, "q/b.py": b}, "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (6, 3),  # root 4-6: 3
                             "kit/q/b.py": (10, 6)}  # Thing less its methods {1, 4} 2 + go 2 + make 2 = 6
    assert _defs(report)["kit/q/b.py"] == ["Thing", "Thing.go", "make"]  # `go` asked before Thing was reached


def test_a_callback_reference_counts(tmp_path):
    a = """\
from kit.q.b import score


def root(xs):
    return sorted(xs, key=score)
"""  # 4-5 root: 5 lines
    b = "def score(x):\n    return -x\n"  # 1-2
    report = _report(tmp_path, {"p/a.py": a, "q/b.py": b}, "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (5, 2),  # root 4-5: 2
                             "kit/q/b.py": (2, 2)}  # score 1-2: 2, never called here, only passed


def test_a_class_brings_its_init_properties_fields_and_module_constants(tmp_path):
    a = """\
from kit.q.b import Box
from kit.q.c import TABLE


def root():
    return Box(), TABLE
"""  # 5-6 root: 6 lines
    b = """\
from dataclasses import dataclass, field

from kit.q.c import default_items


@dataclass
class Box:
    items: list = field(default_factory=default_items)

    def __post_init__(self):
        self.n = len(self.items)

    @property
    def size(self):
        return self.n

    def other(self):
        return 0
"""  # 6-18 Box (decorator included); 10-11 __post_init__, 13-15 size, 17-18 other: 18 lines
    c = """\
def default_items():
    return []


def build_table():
    return {}


TABLE = build_table()
"""  # 1-2 default_items, 5-6 build_table, 9 TABLE: 9 lines
    report = _report(tmp_path, {"p/a.py": a, "q/b.py": b, "q/c.py": c}, "kit.p.a.root")
    assert _rows(report) == {"kit/p/a.py": (6, 2),  # root 5-6: 2
                             "kit/q/b.py": (18, 11),  # Box less methods {6, 7, 8, 9, 12, 16} 6 + 2 + size 3 = 11
                             "kit/q/c.py": (9, 5)}  # default_items 2 + build_table 2 + TABLE 1 = 5
    assert "Box.other" not in _defs(report)["kit/q/b.py"]


def test_the_command_line(tmp_path):
    a = "from kit.q.b import helper\n\n\ndef root():\n    return helper()\n"  # 4-5 root: 5 lines
    _package(tmp_path, {"p/a.py": a, "q/b.py": B})
    cmd = [sys.executable, str(TOOL), "kit.p.a.root", "--package", "kit", "--root", str(tmp_path)]
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    assert text[0].split() == ["path", "package", "lines", "reached"]
    assert [line.split() for line in text[1:3]] == [["kit/p/a.py", "p", "5", "2"], ["kit/q/b.py", "q", "6", "2"]]
    assert text[3] == "2 files, 11 lines (4 lines in the reached functions) in 2 packages"  # 5 + 6, 2 + 2
    data = json.loads(subprocess.run(cmd + ["--json"], capture_output=True, text=True, check=True).stdout)
    assert data["totals"] == {"files": 2, "lines": 11, "reached_lines": 4, "packages": 2}
    bad = subprocess.run(cmd[:2] + ["kit.p.a.nothing"] + cmd[3:], capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "defines no nothing" in bad.stderr


def test_a_stopped_prefix_is_neither_counted_nor_followed(tmp_path):
    pkg = tmp_path / "kit"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""kit"""\n')
    (pkg / "lib" / "__init__.py").write_text('"""lib"""\n')
    (pkg / "lib" / "util.py").write_text("from kit import deep\n\n\ndef helper():\n    return deep.far()\n")
    (pkg / "deep.py").write_text("def far():\n    return 1\n")
    (pkg / "top.py").write_text("from kit.lib.util import helper\n\n\ndef main():\n    return helper()\n")
    index = reach.Index(tmp_path, "kit")
    assert {m["path"] for m in index.report(["kit.top.main"])["modules"]} == {"kit/top.py", "kit/lib/util.py",
                                                                               "kit/deep.py"}
    # kit.lib stopped: util.helper is not counted, so deep.far (reached only through it) is not either
    assert [m["path"] for m in index.report(["kit.top.main"], ("kit.lib",))["modules"]] == ["kit/top.py"]
