"""A sandboxed program the evaluator talks to: one request line in, one tagged reply line out, until it is done.

Why: a test that is not a list of literal calls (a loop over random inputs, a helper from the prompt) cannot be
judged by value up front, and running it inside the candidate's process lets the candidate forge it (steal a
nonce, redefine the helper the test calls). So the TRUSTED test runs in the evaluator, and each call of the
candidate crosses into the sandbox: the evaluator writes the arguments as plain data, the program (the
candidate's code plus a small server loop, under every protection of ``runner.py``) calls the function and
writes back plain data, which the evaluator decodes with its own constructors. The program never sees the test.

The reply tag only separates replies from whatever else the program prints; a program that forges replies can
only choose its own answers, which returning them would do anyway.

The trusted test itself runs bounded too (issue 30): what it rebuilds from the program's answers is bounded where it
is decoded, but a test can still grow a small answer (``tuple(range(n))`` of a returned range, ``set()`` of a
list of colliding ints), so ``talk`` runs in a forked child of the evaluator with ``TEST_MEMORY`` more address space
than the evaluator has, killed at the conversation's deadline; only its outcome comes back (pickled, at most
``OUTCOME_BYTES``). The evaluator's own memory never holds the candidate's answers.
"""

from __future__ import annotations

import gc
import json
import math
import os
import pickle
import resource
import select
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable

from rleif_kit.sandbox.launcher import PR_SET_PDEATHSIG, SETUP_FAILED, _lib
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
TEST_MEMORY = 1 << 30  # address space the trusted test may add to the evaluator's (the sandbox's programs get 4 GiB)
OUTCOME_BYTES = 1 << 20  # the pickled outcome of the test (None, or the exception it raised)


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
        data, at, pending, size = self.buffer, 0, [], 0  # linear: each byte is looked at once, copied once
        while True:
            end = data.find(b"\n", at)
            if end >= 0:
                line, at, pending, size = b"".join(pending) + data[at:end], end + 1, [], 0
                if line.startswith(TAG):
                    self.buffer = data[at:]
                    reply = json.loads(line[len(TAG):])
                    if not isinstance(reply, dict):
                        raise ValueError("a reply that is not an object")
                    return reply
                continue  # the program's own prints
            pending.append(data[at:])
            size += len(data) - at
            if size > MAX_REPLY:
                raise ValueError("a reply longer than 16 MiB")
            ready, _, _ = select.select([self.proc.stdout], [], [], self._left())
            data, at = b"", 0
            if ready:
                data = os.read(self.proc.stdout.fileno(), 1 << 16)
                if not data:
                    raise ProgramGone("the program exited before answering")


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
    try:
        outcome: Any = _bounded_talk(talk, proc, start + timeout)
    except BaseException as e:  # noqa: BLE001 - the test's verdict, whatever it raised
        outcome = e
    finally:
        try:
            proc.stdin.close()  # the server loop ends at EOF
        except OSError:
            pass
    timed_out = isinstance(outcome, TimeoutError)
    # a failed test need not wait for the program (it may be blocked writing a reply nobody reads): only a pass
    # and a program that is gone (whose exit status says why) do
    failed = isinstance(outcome, BaseException) and not isinstance(outcome, ProgramGone)
    try:
        proc.wait(timeout=0.1 if failed else max(0.5, start + timeout - time.monotonic()))
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


def _bounded_talk(talk, proc: subprocess.Popen, deadline: float) -> Any:
    """``talk(call)`` in a forked child of the evaluator, with ``TEST_MEMORY`` more address space than the evaluator
    has and killed at ``deadline`` (plus a second); returns what it returned, or the exception it raised (a
    TimeoutError when it ran out of time, a MemoryError that says so when it ran out of memory). The child holds
    the program's pipes, so the answers it rebuilds never enter the evaluator. Without ``fork``: here."""
    if not hasattr(os, "fork"):
        return _outcome(talk, proc, deadline)[1]
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns, never runs the evaluator's exit handlers
        try:
            os.close(read)
            _confine({write, proc.stdin.fileno(), proc.stdout.fileno()}, deadline)
            outcome = _outcome(talk, proc, deadline)
            try:
                data = pickle.dumps(outcome)
            except Exception:  # noqa: BLE001 - e.g. an exception class the test defined itself
                data = pickle.dumps(("foreign", type(outcome[1]).__name__, str(outcome[1])[:300]))
            while data:
                data = data[os.write(write, data):]
        finally:
            os._exit(0)
    os.close(write)
    return _collect(read, pid, deadline + 1.0)


def _confine(keep: set[int], deadline: float) -> None:
    """In the child: dies with the evaluator (a SIGKILLed evaluator leaves no test running on), CPU seconds up to
    the deadline, only stdio and ``keep`` open, prints to /dev/null (another thread may have held the evaluator's
    stdout lock at the fork), no garbage collection of the evaluator's objects, and the address-space limit."""
    try:
        _lib().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() == 1:  # the evaluator died between the fork and the prctl
            os._exit(0)
    except (OSError, AttributeError):  # no prctl (not Linux): the deadline's SIGKILL and RLIMIT_CPU still hold
        pass
    seconds = max(1, math.ceil(deadline - time.monotonic()) + 1)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
    except (OSError, ValueError):
        pass
    gc.disable()
    try:  # the open ones (closing up to SC_OPEN_MAX, a million here, is slow where there is no close_range)
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
    except OSError:
        fds = range(3, 1 << 16)
    for fd in fds:
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass
    sys.stdout = sys.stderr = open(os.devnull, "w")
    try:
        with open("/proc/self/statm") as f:
            limit = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE") + TEST_MEMORY
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        limit = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    except (OSError, ValueError):  # no /proc (macOS): its RLIMIT_AS is not enforced either
        pass


def _outcome(talk, proc: subprocess.Popen, deadline: float) -> tuple:
    try:
        return "returned", talk(Channel(proc, deadline).call)
    except MemoryError:
        return "raised", MemoryError(f"the trusted test went over its memory limit ({TEST_MEMORY >> 20} MiB)")
    except BaseException as e:  # noqa: BLE001 - the test's verdict, whatever it raised
        return "raised", e


def _collect(read: int, pid: int, until: float) -> Any:
    """The child's outcome (read at most ``OUTCOME_BYTES`` until ``until``), then the child killed and reaped."""
    chunks, size, late = [], 0, False
    try:
        while size <= OUTCOME_BYTES:
            ready, _, _ = select.select([read], [], [], max(0.0, until - time.monotonic()))
            if not ready:
                late = True
                break
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(read)
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            status = os.waitpid(pid, 0)[1]
        except ChildProcessError:  # reaped by someone else (a SIGCHLD handler)
            status = 0
    if late:
        return TimeoutError("the program did not answer in time")
    if size > OUTCOME_BYTES:
        return RuntimeError(f"the trusted test's outcome was longer than {OUTCOME_BYTES >> 20} MiB")
    try:
        kind, *value = pickle.loads(b"".join(chunks))  # noqa: S301 - written by our own child, never the program
    except Exception:  # noqa: BLE001 - no (whole) outcome: the child died (a signal) or was cut short
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        why = f"was killed by signal {sig}" if sig else "gave no outcome"
        return RuntimeError(f"the trusted test's process {why}")
    if kind == "returned" and len(value) == 1:
        return value[0]
    if kind == "raised" and len(value) == 1 and isinstance(value[0], BaseException):
        return value[0]
    if kind == "foreign" and len(value) == 2:
        return type(str(value[0]), (Exception,), {})(str(value[1]))
    return RuntimeError("the trusted test's outcome is not readable")
