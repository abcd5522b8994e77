"""One run per output directory (issue 17): a second run fails at once naming the holder; a lock left by a
killed run is taken over; the processes a holder starts (kernels, ranks) share its lock."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core import run_lock

HOLD = """
import sys, time
from rleif_kit.core import run_lock
run_lock.acquire(sys.argv[1], "rleif run params/other.toml")
print("held", flush=True)
time.sleep(60)
"""


def _holder(directory):
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True,
                            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_run_fails_at_once_naming_the_holder_and_a_killed_ones_lock_is_taken_over(tmp_path):
    out = tmp_path / "run"
    proc = _holder(out)
    try:
        t0 = time.perf_counter()
        with pytest.raises(run_lock.RunLocked) as locked:
            run_lock.acquire(out)
        assert time.perf_counter() - t0 < 1.0  # at once, no waiting
        message = str(locked.value)
        assert f"pid {proc.pid}" in message and "rleif run params/other.toml" in message and "started 20" in message
        assert "\n" not in message
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    run_lock.acquire(out)  # the killed run's lock is free: taken over, its text rewritten
    try:
        info = json.loads((out / run_lock.LOCK_FILE).read_text())
        assert info["pid"] == os.getpid()
        assert os.environ[run_lock.ENV] == str(out.resolve())
        run_lock.acquire(out / "iter-2")  # the same process, or a kernel it starts, inside its directory: no-op
    finally:
        run_lock.release(out)
    assert run_lock.ENV not in os.environ and not run_lock._held


def test_locking_releases_what_the_command_took(tmp_path):
    with run_lock.locking(True):
        run_lock.acquire(tmp_path / "a")
        assert run_lock._held
    assert not run_lock._held and run_lock.LOCK_ON_SETUP is False


def test_a_stage_command_on_a_held_directory_exits_2_with_one_line(tmp_path):
    out = tmp_path / "run"
    proc = _holder(out)
    try:
        done = subprocess.run([sys.executable, "-m", "rleif_kit.evolve", "--params", str(TINY_PARAMS),
                               *[a for o in tiny_overrides(out) for a in ("--set", o)]],
                              capture_output=True, text=True, cwd=ROOT, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        cli = subprocess.run([sys.executable, "-m", "rleif_kit.pipeline.cli", "evolve", str(TINY_PARAMS),
                              *[a for o in tiny_overrides(out) for a in ("--set", o)]],
                             capture_output=True, text=True, cwd=ROOT, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for result, prefix in ((done, "python -m rleif_kit.evolve: error:"), (cli, "rleif evolve: error:")):
        assert result.returncode == 2, result.stderr
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(prefix) and f"pid {proc.pid}" in lines[0], result.stderr
    assert not (out / "01_evolve").exists()  # nothing written
