"""Every `rleif` command of docs/your-own-7b-run.md, run as written on the tiny-math preset: the 7B params file
becomes params/tiny-math.toml (with the session run's paths), settings.json a loopback teacher's. The run itself
is the session's tiny-math run (tests/test_tiny_math.py), so `rleif run` here is the resume: every stage skipped."""

from __future__ import annotations

import json
import os
import re
import shlex

import pytest

from conftest import MATH_PARAMS as PRESET
from conftest import ROOT, math_overrides

pytestmark = pytest.mark.slow

DOC = ROOT / "docs" / "your-own-7b-run.md"


def doc_commands() -> list[str]:
    """The `rleif ...` lines of the doc's bash blocks, in order."""
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(), re.S)
    return [line.split("  #")[0].strip() for b in blocks for line in b.splitlines() if line.startswith("rleif ")]


def test_the_doc_names_every_step():
    assert [shlex.split(c)[1] for c in doc_commands()] == ["data", "plan", "doctor", "evolve", "run"]


def test_every_command_runs_on_the_tiny_math_run(math_run, tmp_path, capsys, monkeypatch):
    from rleif_kit.pipeline.cli import main
    from rleif_kit.testing.demo_math import KEY_ENV
    from rleif_kit.testing.teacher import serve, settings_for

    root, _ = math_run
    server, _ = serve(None)  # a fresh teacher for the endpoint checks (the run's own is stopped)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(settings_for(server.base_url, KEY_ENV, root / "run" / "raw")))
    monkeypatch.setenv(KEY_ENV, "sk-lb-Q3v8Xk2Rw7Jm")  # demo_math's own: 6 characters of a key are redacted
    monkeypatch.chdir(ROOT)
    sets = [a for o in math_overrides(root) for a in ("--set", o)]
    outputs = {}
    try:
        for command in doc_commands():
            argv = shlex.split(command)[1:]
            argv = [str(PRESET) if a.startswith("params/wizardmath-7b") else str(settings) if a == "settings.json"
                    else a for a in argv]
            if argv[0] != "plan":
                argv += sets
            else:
                argv += sets[:4]
            if argv[0] == "run":
                argv += ["--report-dir", str(root / "reports")]
            code = main(argv)
            out = capsys.readouterr()
            outputs[argv[0]] = out.out
            # doctor exits 1 when a reward-health check of the finished run fails; what it must never fail is
            # the run's inputs: config, settings, keys, endpoints, models, data files, eval sets
            allowed = (0, 1) if argv[0] == "doctor" else (0,)
            assert code in allowed, f"{command}: exit {code}\n{out.out[-2000:]}\n{out.err[-2000:]}"
    finally:
        server.stop()
    assert "seeds        exists" in outputs["data"] and "sft dataset  exists" in outputs["data"]
    inputs = re.compile(r"^(config|settings|key_\S+|endpoint_\S+|base_model|irm_base|prm_base|data_\S+|eval_\S+)\s+(\w+)",
                        re.M)
    rows = dict(inputs.findall(outputs["doctor"]))
    assert {"config", "data_seeds", "data_sft", "eval_gsm8k", "endpoint_evolve"} <= set(rows), rows
    assert all(status in ("OK", "WARN") for status in rows.values()), rows
    assert "PPO mini_batch" in outputs["plan"]
    assert json.loads(outputs["evolve"])["requests"] > 0
    assert "skipped" in outputs["run"] and os.path.exists(root / "reports" / "index.html")
