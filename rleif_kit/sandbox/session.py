"""A sandboxed program the evaluator talks to: one request line in, one tagged reply line out, until it is done.

Why: a test that is not a list of literal calls (a loop over random inputs, a helper from the prompt) cannot be
judged by value up front, and running it inside the candidate's process lets the candidate forge it (steal a
nonce, redefine the helper the test calls). So the TRUSTED test runs in the evaluator, and each call of the
candidate crosses into the sandbox: the evaluator writes the arguments as plain data, the program (the
candidate's code plus a small server loop, under every protection of ``runner.py``) calls the function and
writes back plain data, which the evaluator decodes with its own constructors. The program never sees the test.

The reply tag only separates replies from whatever else the program prints; a program that forges replies can
only choose its own answers, which returning them would do anyway.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from rleif_kit.sandbox.launcher import SETUP_FAILED
from rleif_kit.sandbox.runner import (
    _ENV,
    Limits,
    RunResult,
    _config,
    _kill_uid,
    _launcher,
    _tail,
    sandbox_plan,
    write_program,
)
from rleif_kit.sandbox.slots import _acquire_slot, _release_slot, _slot_uid

TAG = b"\x1e"  # starts every reply line of the server loop
MAX_REPLY = 16 << 20


class ProgramGone(RuntimeError):
    """The program exited (or closed its output) before answering."""


class Channel:
    """``call(args, kwargs) -> {"value": plain} | {"error": str}`` over the program's stdin/stdout."""

    def __init__(self, proc: subprocess.Popen, deadline: float):
        self.proc, self.deadline, self.buffer = proc, deadline, b""
        os.set_blocking(proc.stdin.fileno(), False)
        os.set_blocking(proc.stdout.fileno(), False)

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the program did not answer in time")
        return left

    def call(self, request: Any) -> dict:
        data = json.dumps(request).encode() + b"\n"
        while data:
            _, ready, _ = select.select([], [self.proc.stdin], [], self._left())
            if ready:
                try:
                    data = data[os.write(self.proc.stdin.fileno(), data):]
                except (BrokenPipeError, OSError):
                    raise ProgramGone("the program stopped reading its input") from None
        while True:
            line, sep, rest = self.buffer.partition(b"\n")
            if sep:
                self.buffer = rest
                if line.startswith(TAG):
                    reply = json.loads(line[len(TAG):])
                    if not isinstance(reply, dict):
                        raise ValueError("a reply that is not an object")
                    return reply
                continue  # the program's own prints
            if len(self.buffer) > MAX_REPLY:
                raise ValueError("a reply longer than 16 MiB")
            ready, _, _ = select.select([self.proc.stdout], [], [], self._left())
            if ready:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not chunk:
                    raise ProgramGone("the program exited before answering")
                self.buffer += chunk


def run_session(source: str, talk: Callable[[Callable[[Any], dict]], Any], timeout: float = 10.0,
                limits: Limits = Limits(), slot: int | None = None,
                files: dict[str, str] | None = None) -> tuple[RunResult, Any]:
    """Start ``source`` in the sandbox with pipes, run ``talk(call)`` in the evaluator, then end the program.
    Returns the program's RunResult and what ``talk`` returned (or the exception it raised). ``timeout`` bounds
    the whole conversation; ``slot`` (default: a free one of the process's pool) must not be in use by a
    parallel run."""
    import shutil

    plan = sandbox_plan()
    pooled = slot is None
    slot = _acquire_slot() if pooled else slot
    uid = _slot_uid(slot) if plan.drop_uid else None
    tmp = tempfile.mkdtemp(prefix="rleif-sandbox-")
    try:
        write_program(tmp, uid, source, files)
        cfg = _config(plan, tmp, uid, timeout, limits)
        with tempfile.TemporaryFile() as err:
            return _converse(plan, cfg, err, talk, timeout, uid)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if pooled:
            _release_slot(slot)


def _converse(plan, cfg: dict, err, talk, timeout: float, uid: int | None) -> tuple[RunResult, Any]:
    status_r, status_w = os.pipe()
    cfg["status_fd"] = status_w
    env = dict(_ENV, HOME=cfg["tmpdir"], TMPDIR=cfg["tmpdir"])
    start = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", _launcher(), __import__("marshal").dumps(cfg).hex()],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, pass_fds=(status_w,),
                                start_new_session=True, cwd=cfg["tmpdir"], env=env)
    finally:
        os.close(status_w)
    timed_out = False
    try:
        outcome: Any = talk(Channel(proc, start + timeout).call)
    except TimeoutError as e:
        outcome, timed_out = e, True
    except BaseException as e:  # noqa: BLE001 - the test's verdict, whatever it raised
        outcome = e
    finally:
        try:
            proc.stdin.close()  # the server loop ends at EOF
        except OSError:
            pass
    try:
        proc.wait(timeout=max(0.5, start + timeout - time.monotonic()) if not timed_out else 0.1)
    except subprocess.TimeoutExpired:
        if plan.namespaces:
            proc.terminate()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()
    proc.stdout.close()
    with os.fdopen(status_r, "rb") as f:
        status = dict(line.partition(" ")[::2] for line in f.read().decode(errors="replace").splitlines())
    protections = status.get("protections", "").split()
    if uid is not None and "pid-namespace" not in protections:
        _kill_uid(uid)
    rc = proc.returncode
    if plan.namespaces and rc is not None and 128 < rc <= 192:
        rc = -(rc - 128)
    result = RunResult(returncode=rc, stdout="", stderr=_tail(err, 1 << 13), timed_out=timed_out,
                       wall_s=time.monotonic() - start, protections=protections,
                       error=status.get("error") if rc == SETUP_FAILED else None)
    return result, outcome
