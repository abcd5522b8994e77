"""Run untrusted Python (model-written code) in a sandbox: one process per program, bounded and isolated.

Why: HumanEval executes whatever the model wrote. A loop, a fork bomb, a 20 GB allocation, an
``rm``, a socket or ``os.kill(os.getppid())`` must each end as a failed test with its reason, and
leave the machine and the evaluator intact. Every program gets:
- its own process group, session and temp dir, and a wall-clock timeout that SIGKILLs the group;
- rlimits on CPU time, address space, processes, file size and open files (no core files);
- when the evaluator runs as root (tests and CI do, where the process limit does not bind and every
  file is writable): a uid of its own (one per parallel slot, no passwd entry, no groups), so the
  process limit counts only that program, it can write only its temp dir, and every process it
  left behind can be found and killed; and ``no_new_privs`` so setuid binaries do not help it;
- on Linux where namespaces are allowed (as root, or through a user namespace): fresh network
  (no interfaces up: nothing reachable), PID (the evaluator is invisible; the kernel kills every
  leftover when the program exits), IPC and mount namespaces, the file system read-only except the
  temp dir, and a fresh /proc. A directory that hides the interpreter from the unprivileged uid
  (e.g. pyenv under a 0700 /root) is replaced by a tmpfs that shows only what Python needs.

Where the OS allows less (macOS, containers without namespaces, a non-root user without user
namespaces), the sandbox falls back step by step and ``sandbox_plan().protections`` says which
protections are active; rlimits and the timeout always are.

The verdict channel belongs to the evaluator: a program's results count only when the harness reports them
(``__rleif_report(value)``, defined in the program's namespace by the launcher before the program's code runs; only
a program whose source names it gets the channel's two fds, every other one inherits stdio alone). The reporter
encodes the plain value as JSON, reads the run's secret token (32 random bytes the evaluator put in a pipe, never in
the program's text, argv, environment or files) after the last call, signs the JSON with it (HMAC-SHA256) and writes
it into a file the evaluator opened and reads itself. A file the program writes (``result.json`` or any other), a
write to any fd it finds, an early exit, an exit hook or a thread that rewrites the channel after the harness, a
patched ``sys.exit``, ``print``, ``json`` or ``os``: none of it carries a valid signature or reaches the reporter,
and the run then has no results. What is signed is only the program's answers: the expected values never enter the
sandbox, so even a program that takes the token or rewrites the harness as it runs (a tracer swapping its functions)
can only report answers of its own choosing, as returning them would.

Speed: the launcher (``sandbox/launcher.py``, compiled, run as ``python -I -S sandbox_launcher.pyc CONFIG``)
builds the sandbox around itself and then runs the program in its own interpreter, with the evaluator's
site-packages on ``sys.path``; one interpreter start per program, not two. This file is the evaluator side.
"""

from __future__ import annotations

import functools
import marshal
import os
import secrets
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

from rleif_kit.sandbox import launcher as sandbox_launcher
from rleif_kit.sandbox.launcher import SETUP_FAILED
from rleif_kit.sandbox.root_view import root_view
from rleif_kit.sandbox.slots import _acquire_slot, _release_slot, _slot_uid


@dataclass(frozen=True)
class Limits:
    """Per-program resource limits (CPU seconds default to the wall timeout plus one)."""

    memory_bytes: int = 4 << 30
    nproc: int = 32
    file_bytes: int = 16 << 20
    open_files: int = 256
    cpu_seconds: int | None = None
    tmp_bytes: int = 64 << 20  # the whole temp dir (a tmpfs of its own where namespaces allow), not just one file
    # files and folders in that tmpfs: an empty file costs no bytes but about 1 KiB of the host kernel's memory
    # (issue 30: 900k of them in 6 s took 0.9 GiB); 4096 cost at most 4 MiB
    tmp_inodes: int = 4096


@dataclass
class RunResult:
    """What one program did: exit code (negative: killed by that signal), output tails, timing, protections."""

    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    wall_s: float
    protections: list[str] = field(default_factory=list)
    error: str | None = None  # the sandbox itself failed (never the program's fault)
    result: bytes | None = None  # what the harness reported (``__rleif_report``), signed with the run's token
    forged: bool = False  # the verdict channel held something the harness did not sign (never counted)


REPORTER = "__rleif_report"  # the harness's reporter; a program whose source names it gets the verdict channel

_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@dataclass(frozen=True)
class SandboxPlan:
    """How programs run on this machine: the strongest setup that worked, and what it protects."""

    namespaces: bool
    drop_uid: bool
    protections: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # why stronger setups were not used


_plan: SandboxPlan | None = None
_PLAN_LOCK = threading.Lock()


def sandbox_plan(refresh: bool = False) -> SandboxPlan:
    """Probe once (a trivial program under each setup, strongest first) and remember what works."""
    global _plan
    with _PLAN_LOCK:
        if _plan is None or refresh:
            _plan = _probe()
    return _plan


_PROBE = "import collections, fractions, hashlib, heapq, itertools, math, re, string, typing\nprint('ok')\n"


def _probe() -> SandboxPlan:
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    if sys.platform != "linux":
        candidates = [(False, True), (False, False)] if root else [(False, False)]
    elif root:  # a dropped uid without namespaces beats root inside them
        candidates = [(True, True), (False, True), (True, False), (False, False)]
    else:
        candidates = [(True, False), (False, False)]
    notes = []
    for ns, drop in candidates:
        trial = SandboxPlan(ns, drop)
        result = _run(trial, _PROBE, timeout=30.0, limits=Limits(), slot=0)
        if result.returncode == 0 and result.stdout.strip() == "ok":
            return SandboxPlan(ns, drop, tuple(result.protections), tuple(notes))
        why = result.error or (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        notes.append(f"namespaces={ns}, unprivileged uid={drop}: {why}")
    raise RuntimeError("the sandbox cannot run Python at all: " + "; ".join(notes))


def describe_sandbox() -> str:
    """One line for logs and notebooks: the protections in force and why stronger ones are not."""
    plan = sandbox_plan()
    text = "sandbox protections: " + ", ".join(plan.protections)
    return text + ("" if not plan.notes else " (not used: " + "; ".join(plan.notes) + ")")


def run_python(source: str, timeout: float = 10.0, limits: Limits = Limits(), slot: int | None = None,
               files: dict[str, str] | None = None) -> RunResult:
    """Run one Python program in the sandbox; never raises for anything the program does.

    ``slot`` selects the unprivileged uid (default: a free one of the process's pool; an explicit slot must not
    be in use by a parallel run); ``files`` are written beside the program (name -> text) for it to read.
    """
    if slot is not None:
        return _run(sandbox_plan(), source, timeout, limits, slot, files)
    slot = _acquire_slot()
    try:
        return _run(sandbox_plan(), source, timeout, limits, slot, files)
    finally:
        _release_slot(slot)


def run_many(sources, timeout: float = 10.0, limits: Limits = Limits(), workers: int | None = None,
             on_done=None, files=None) -> list[RunResult]:
    """Run many programs on ``workers`` parallel slots (default: one per CPU); results in input order.

    ``on_done(result)`` is called as each finishes (for a progress bar); ``files[i]`` (name -> text, or None)
    is written beside program ``i``. Slots come from one pool per process, so calls from several threads at
    once (PPO's scorer and an evolution's test check, say) never share a uid.
    """
    from concurrent.futures import ThreadPoolExecutor

    plan = sandbox_plan()
    workers = max(1, workers or os.cpu_count() or 1)

    def one(job: tuple[str, dict | None]) -> RunResult:
        slot = _acquire_slot()
        try:
            result = _run(plan, job[0], timeout, limits, slot, job[1])
        finally:
            _release_slot(slot)
        if on_done is not None:
            on_done(result)
        return result

    sources = list(sources)
    jobs = list(zip(sources, files if files is not None else [None] * len(sources)))
    if len(jobs) == 1 or workers == 1:
        return [one(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


@functools.lru_cache(maxsize=1)
def _launcher() -> str:
    """The launcher compiled once into a private temp dir: a script is recompiled at every start (9 ms)."""
    import atexit
    import py_compile
    import shutil
    import tempfile

    folder = tempfile.mkdtemp(prefix="rleif-launcher-")
    atexit.register(shutil.rmtree, folder, True)
    os.mkdir(os.path.join(folder, "root"), 0o755)  # each sandbox mounts its own new root here, in its namespace
    return py_compile.compile(os.path.abspath(sandbox_launcher.__file__),
                              cfile=os.path.join(folder, "sandbox_launcher.pyc"), doraise=True)


def _user_processes(uid: int) -> list[int]:
    """Pids whose real uid is ``uid`` (empty where there is no /proc)."""
    pids = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                if any(line.startswith("Uid:") and line.split()[1] == str(uid) for line in f):
                    pids.append(int(entry))
        except (OSError, IndexError):
            continue
    return pids


def _kill_uid(uid: int) -> None:
    """SIGKILL every process left with ``uid`` (a slot uid: nothing else runs under it)."""
    for _ in range(50):
        pids = _user_processes(uid)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.02)


def _outlived(proc, timeout: float) -> bool:
    """Wait for ``proc`` up to ``timeout`` s; True if it is still running. Uses a pidfd where there is one:
    ``Popen.wait(timeout)`` polls with sleeps of up to 50 ms, which would dominate a 50 ms program."""
    import select
    import subprocess

    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
            return False
        except subprocess.TimeoutExpired:
            return True
    try:
        ready, _, _ = select.select([pidfd], [], [], timeout)
    finally:
        os.close(pidfd)
    return not ready


def _tail(f, limit: int) -> str:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - limit))
    return f.read().decode("utf-8", errors="replace")


def _config(plan: SandboxPlan, tmp: str, uid: int | None, timeout: float, limits: Limits) -> dict:
    """What the launcher needs (marshalled into its argv)."""
    import math

    nproc = limits.nproc
    if uid is None and hasattr(os, "geteuid") and os.geteuid() != 0:
        nproc += len(_user_processes(os.getuid()))  # the limit counts all of this user's processes
    keep, mask = root_view() if plan.namespaces else ([], [])
    return {"tmpdir": tmp, "uid": uid, "namespaces": plan.namespaces, "parent": os.getpid(),
            "root_dir": os.path.join(os.path.dirname(_launcher()), "root"), "keep": keep, "mask": mask,
            "tmp_bytes": limits.tmp_bytes, "tmp_inodes": limits.tmp_inodes,
            "limits": {"memory_bytes": limits.memory_bytes, "nproc": nproc, "file_bytes": limits.file_bytes,
                       "open_files": limits.open_files, "cpu_seconds": limits.cpu_seconds or math.ceil(timeout) + 1}}


def _run(plan: SandboxPlan, source: str, timeout: float, limits: Limits, slot: int,
         files: dict[str, str] | None = None) -> RunResult:
    """One program under ``plan``: write it to a fresh temp dir, launch, wait, kill what is left, clean up."""
    import shutil
    import tempfile

    uid = _slot_uid(slot) if plan.drop_uid else None
    tmp = tempfile.mkdtemp(prefix="rleif-sandbox-")
    try:
        write_program(tmp, uid, source, files)
        cfg = _config(plan, tmp, uid, timeout, limits)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as verdict:
            token = secrets.token_bytes(32)
            channel = (verdict, token) if REPORTER in source else None  # other programs hold only stdio
            rc, timed_out, status, wall = _launch_and_wait(plan, cfg, out, err, timeout, channel)
            result, forged = _verdict(verdict, token, limits.file_bytes)
            protections = status.get("protections", "").split()
            if uid is not None and "pid-namespace" not in protections:
                _kill_uid(uid)  # processes that left the group (setsid) but not the uid
            if plan.namespaces and rc is not None and 128 < rc <= 192 and not timed_out:
                rc = -(rc - 128)  # the launcher's parent reports a signalled child as 128 + signal
            return RunResult(returncode=None if timed_out else rc, stdout=_tail(out, 1 << 16),
                             stderr=_tail(err, 1 << 13), timed_out=timed_out, wall_s=wall, protections=protections,
                             error=status.get("error") if rc == SETUP_FAILED else None, result=result,
                             forged=forged)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_program(tmp: str, uid: int | None, source: str, files: dict[str, str] | None) -> None:
    """``program.py`` and its input files into the temp dir, owned by the slot's uid (and the dir with them)."""
    for name, text in {"program.py": source, **(files or {})}.items():
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
            f.write(text)
        if uid is not None:
            os.chown(os.path.join(tmp, name), uid, uid)
    if uid is not None:
        os.chown(tmp, uid, uid)


def _verdict(f, token: bytes, limit: int) -> tuple[bytes | None, bool]:
    """(the harness's payload, False) when the verdict file holds a frame signed with ``token``; (None, True) when
    it holds anything else; (None, False) when it is empty. At most ``limit`` bytes of payload are read."""
    import hmac

    f.seek(0)
    data = f.read(limit + 65)  # the mac's 64 hex digits and its newline, then the payload
    if not data:
        return None, False
    mac, newline, payload = data.partition(b"\n")
    if not newline or len(payload) > limit:
        return None, True
    expected = hmac.new(token, payload, "sha256").hexdigest().encode()
    return (payload, False) if hmac.compare_digest(mac, expected) else (None, True)


def _launch_and_wait(plan: SandboxPlan, cfg: dict, out, err, timeout: float,
                     channel: tuple | None = None) -> tuple[int, bool, dict, float]:
    """Start the launcher in a new session; on timeout kill its whole group. (rc, timed_out, status, wall_s).
    ``channel`` (verdict file, token): the file is passed open for writing, the token in a pipe of its own."""
    import subprocess

    status_r, status_w = os.pipe()
    cfg["status_fd"] = status_w
    passed = [status_w]
    if channel is not None:
        token_r, token_w = os.pipe()
        os.write(token_w, channel[1])  # 32 bytes: far below a pipe's buffer
        os.close(token_w)
        verdict_w = os.open(f"/proc/self/fd/{channel[0].fileno()}", os.O_WRONLY) if os.path.isdir("/proc/self/fd") \
            else os.dup(channel[0].fileno())
        cfg["verdict_fds"] = [verdict_w, token_r]
        passed += [verdict_w, token_r]
    env = dict(_ENV, HOME=cfg["tmpdir"], TMPDIR=cfg["tmpdir"])
    start = time.monotonic()
    try:
        proc = subprocess.Popen([sys.executable, "-I", "-S", _launcher(), marshal.dumps(cfg).hex()],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=err, pass_fds=tuple(passed),
                                start_new_session=True, cwd=cfg["tmpdir"], env=env)
    except BaseException:
        os.close(status_r)
        raise
    finally:
        for fd in passed:
            os.close(fd)
    timed_out = _outlived(proc, timeout)
    if timed_out and plan.namespaces:  # let the launcher kill and reap the namespace's PID 1 first
        proc.terminate()
        try:
            proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole group, also after a normal exit (leftovers)
    except OSError:
        pass
    proc.wait()
    wall = time.monotonic() - start
    with os.fdopen(status_r, "rb") as f:
        status = dict(line.partition(" ")[::2] for line in f.read().decode(errors="replace").splitlines())
    return proc.returncode, timed_out, status, wall
