"""Every pipeline notebook follows the house skeleton: a parsable parameters cell, setup, a record
cell, and no committed outputs (executed copies live under reports/)."""

from __future__ import annotations

import nbformat
import papermill as pm
import pytest

from conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PARAMETERS = {"params_path", "overrides", "report_dir", "workdir", "settings_path"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_parameters_parse_and_nothing_secret(path):
    params = pm.inspect_notebook(str(path))
    assert set(params) == PARAMETERS  # papermill parses every one (a comment with '=' would hide it)
    assert not any("key" in name for name in params)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_skeleton_and_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert tagged == [1] and nb.cells[0].cell_type == "markdown"
    assert "setup(" in nb.cells[2].source and f'stage="{path.stem}"' in nb.cells[2].source
    assert "record(" in nb.cells[-1].source
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in nb.cells if c.cell_type == "code")
