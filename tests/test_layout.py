"""The house a newcomer reads: one subpackage per stage, layers that only look down, no import cycles.

In-memory, no network: the import graph is built by grimp (import-linter's engine) from the source.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from conftest import ROOT

PACKAGE = ROOT / "rleif_kit"
STAGE_PACKAGES = ("prepare", "evolve", "dedup", "sft", "rewards", "ppo", "evaluation", "diagnostics")
# A string that is a stage's name ("02_dedup", a key) or a path from a stage folder ("05_ppo/log.jsonl");
# prose that names a stage ("run 03_sft first", a help text) is not one.
STAGE_FOLDER = re.compile(r"^0[0-7]_[a-z_]+(/|$)")
# Where stage names may be spelled: the one table of them, and the one module that knows artifact paths.
SPELLS_STAGES = {PACKAGE / "core" / "stages.py", PACKAGE / "core" / "paths.py"}


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_import_linter_contracts_hold():
    """pipeline → stages → shared pieces → worlds → models | llm → core, and no product module imports
    the test helpers (the contracts are in .importlinter)."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert exe, "lint-imports not found: install the test extra (pip install -e '.[test]')"
    proc = subprocess.run([exe, "--config", str(ROOT / ".importlinter")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "2 kept, 0 broken" in proc.stdout


def test_no_module_imports_another_that_imports_it_back():
    graph = grimp.build_graph("rleif_kit")
    cycles = sorted({tuple(sorted((a, b))) for a in graph.modules for b in graph.find_modules_directly_imported_by(a)
                     if graph.chain_exists(importer=b, imported=a)})
    assert cycles == []


def test_a_cycle_would_be_caught(tmp_path):
    """The check above can fail: a two-module package with a cycle is found."""
    pkg = tmp_path / "cyclic_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from cyclic_pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from cyclic_pkg import a  # hidden in a function: still a cycle\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("cyclic_pkg", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert graph.chain_exists(importer="cyclic_pkg.a", imported="cyclic_pkg.b")
    assert graph.chain_exists(importer="cyclic_pkg.b", imported="cyclic_pkg.a")


def test_the_top_holds_only_subpackages():
    loose = sorted(p.name for p in PACKAGE.iterdir() if p.is_file() and p.suffix == ".py" and p.name != "__init__.py")
    assert loose == []


@pytest.mark.parametrize("stage", STAGE_PACKAGES)
def test_every_stage_has_a_stage_module_and_an_entry_point(stage):
    assert (PACKAGE / stage / "stage.py").is_file() and (PACKAGE / stage / "__main__.py").is_file()
    proc = subprocess.run([sys.executable, "-m", f"rleif_kit.{stage}", "--help"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--params" in proc.stdout and "--set" in proc.stdout


def test_one_concept_per_module_no_module_of_re_exports():
    """The rule that replaced the 400-line cap: a module is one concept, long when it reads top to bottom; it says
    what it is in its docstring, and none is a list of re-exports (a reader opens the module that defines a name)."""
    for p in modules():
        tree = ast.parse(p.read_text())
        assert ast.get_docstring(tree), f"{p.relative_to(ROOT)}: no docstring saying what the module is"
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        only_imports = body and all(isinstance(n, (ast.Import, ast.ImportFrom)) or isinstance(n, ast.Assign)
                                    and any(getattr(t, "id", "") == "__all__" for t in n.targets) for n in body)
        assert not only_imports, f"{p.relative_to(ROOT)}: only re-exports"


def _strings(tree: ast.AST):
    """Every string constant that is not a docstring (docstrings may describe the run directory)."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node


def test_no_stage_folder_string_outside_paths():
    """``paths.stage("02_dedup") / "instructions.jsonl"`` is ``paths.dedup_instructions``; a stage's name as a key
    comes from ``core/stages.py``."""
    found = [f"{p.relative_to(ROOT)}:{s.lineno}: {s.value!r}" for p in modules() if p not in SPELLS_STAGES
             for s in _strings(ast.parse(p.read_text())) if STAGE_FOLDER.search(s.value)]
    assert found == []


def test_imports_of_the_kit_sit_at_module_level():
    """An import inside a function hides a cycle from the reader; only the CLI defers the kit's modules (they
    bring torch, transformers, openai or matplotlib, which `rleif config` does not need), and says so."""
    cli = PACKAGE / "pipeline" / "cli.py"
    inner = []
    for p in modules():
        if p == cli:
            continue
        for fn in ast.walk(ast.parse(p.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner += [f"{p.relative_to(ROOT)}:{n.lineno}" for n in ast.walk(fn)
                          if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("rleif_kit")
                          or isinstance(n, ast.Import) and any(a.name.startswith("rleif_kit") for a in n.names)]
    assert inner == []
    assert "off the CLI" in cli.read_text() or "do not need" in cli.read_text()


@pytest.mark.parametrize("stage", ["evolve", "sft"])
def test_a_stage_entry_point_reports_a_bad_config_in_one_line(stage):
    proc = subprocess.run([sys.executable, "-m", f"rleif_kit.{stage}", "--params", "no-such-run.toml"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"python -m rleif_kit.{stage}: error: no-such-run.toml: config file "
                                                f"not found (looked in {ROOT / 'no-such-run.toml'})"]
