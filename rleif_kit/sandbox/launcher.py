"""The sandbox's launcher half (see ``sandbox/runner.py``): run as a compiled script, ``python -I -S
sandbox_launcher.pyc CONFIG``, it builds the sandbox around itself (namespaces, file system, uid, rlimits)
and then runs the program in its own interpreter, so each program costs one interpreter start, not two.

It runs before anything else in that process, so it imports only what it needs (marshal for its config, the
C ``_signal`` module, no json or dataclasses; for a program that reports, the C modules its reporter is built
from: ``fcntl``, ``_json``, ``_sha256``) and nothing of rleif_kit.
"""

from __future__ import annotations

import _signal  # the C module: ``signal`` would import enum, 4 ms of every launch
import ctypes
import marshal
import os
import resource
import sys

CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x20000, 0x8000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_MOVE, MS_REC, MS_PRIVATE = 2, 4, 8, 4096, 8192, 16384, 1 << 18
SYS_MOUNT_SETATTR, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 0x1
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 1, 38, 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
SETUP_FAILED = 125  # launcher exit code when the sandbox could not be built (never a program's verdict)
# the harness's verdict channel in the program's process (``sandbox/runner.py``): the evaluator's result file, open
# for writing only, and a pipe holding the run's secret token, read by the harness after the last call
VERDICT_FD, TOKEN_FD = 200, 201

_libc = None


def _lib():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _syscall_ok(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src: str | None, dst: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = (lambda s: s.encode() if s is not None else None)
    _syscall_ok(_lib().mount(enc(src), enc(dst), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {dst}")


def _set_readonly(path: str, readonly: bool, recursive: bool) -> None:
    attr = (ctypes.c_uint64 * 4)(MOUNT_ATTR_RDONLY if readonly else 0, 0 if readonly else MOUNT_ATTR_RDONLY, 0, 0)
    rc = _lib().syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), path.encode(),
                        ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr), ctypes.c_size_t(32))
    _syscall_ok(rc, f"mount_setattr {path}")


def _enter_namespaces() -> None:
    """New mount/net/PID/IPC namespaces (plus a user namespace when not root)."""
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | CLONE_NEWIPC
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        flags |= CLONE_NEWUSER
    _syscall_ok(_lib().unshare(ctypes.c_int(flags)), "unshare")
    if uid != 0:  # map ourselves to ourselves: the program holds no capability in the namespace
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
            with open(f"/proc/self/{name}", "w") as f:
                f.write(text)


def _bind(src: str, dst: str) -> None:
    """Bind ``src`` at ``dst`` (created: directories 0755, a file as an empty file)."""
    if os.path.isdir(src):
        os.makedirs(dst, mode=0o755, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), mode=0o755, exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    _mount(src, dst, None, MS_BIND | MS_REC)


def _prepare_root(cfg: dict) -> str:
    """A new root for the program, in this mount namespace: a tmpfs holding only the interpreter, the standard
    library and the shared libraries it loads (read only, every site-packages masked by an empty tmpfs), a few
    devices, /proc, and the temp dir as a tmpfs of its own capped in bytes and in files (the program's files copied
    in). Nothing else of the host: not its /etc, /home, the evaluator's files or the datasets. Returns the new root."""
    root, tmp = cfg["root_dir"], cfg["tmpdir"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for src in cfg["keep"]:
        if os.path.exists(src):
            _bind(src, root + src)
    for masked in cfg["mask"]:
        if os.path.isdir(root + masked):
            _mount("tmpfs", root + masked, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=4k")
    for dev in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"):
        if os.path.exists(dev):
            _bind(dev, root + dev)
    os.makedirs(root + "/proc", mode=0o555, exist_ok=True)
    files = {}
    for name in os.listdir(tmp):  # what the evaluator put there: the program and its inputs
        with open(os.path.join(tmp, name), "rb") as f:
            files[name] = f.read()
    os.makedirs(root + tmp, mode=0o755, exist_ok=True)
    _mount("tmpfs", root + tmp, "tmpfs", MS_NOSUID | MS_NODEV,
           f"mode=0700,size={cfg['tmp_bytes']},nr_inodes={cfg['tmp_inodes']}")
    uid = cfg["uid"]
    if uid is not None:
        os.chown(root + tmp, uid, uid)
    for name, data in files.items():
        with open(os.path.join(root + tmp, name), "wb") as f:
            f.write(data)
        if uid is not None:
            os.chown(os.path.join(root + tmp, name), uid, uid)
    _set_readonly(root, True, recursive=True)
    _set_readonly(root + tmp, False, recursive=False)
    return root


def _restrict(cfg: dict, protections: list[str]) -> None:
    """In the process that will run the program: limits, identity, working directory."""
    lim, missing = cfg["limits"], []
    for name, value in (("RLIMIT_CPU", lim["cpu_seconds"]), ("RLIMIT_AS", lim["memory_bytes"]),
                        ("RLIMIT_FSIZE", lim["file_bytes"]), ("RLIMIT_NOFILE", lim["open_files"]),
                        ("RLIMIT_CORE", 0), ("RLIMIT_NPROC", lim["nproc"])):
        try:
            resource.setrlimit(getattr(resource, name), (value, value))
        except (AttributeError, ValueError, OSError):  # e.g. RLIMIT_AS on macOS
            missing.append(name)
    protections.append("rlimits" if not missing else "rlimits-without-" + "-".join(missing))
    if cfg["uid"] is not None:
        uid = cfg["uid"]
        os.setgroups([])
        if hasattr(os, "setresuid"):
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
        else:
            os.setgid(uid)
            os.setuid(uid)
        if os.getuid() != uid or os.geteuid() != uid:
            raise OSError("the uid did not change")
        protections.append("unprivileged-uid")
    if sys.platform == "linux":
        _lib().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        _lib().prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
        protections.append("no-new-privs")
        _drop_capabilities()
        protections.append("no-capabilities")
    os.chdir(cfg["tmpdir"])


def _drop_capabilities() -> None:
    """No capability left (ambient, bounding, effective, permitted, inheritable). Where the uid is not dropped the
    program would keep every capability of its user namespace (of the host, as root) and could remount its tmpfs
    without the size and file caps, or its root read-write (issue 30: both worked)."""
    lib = _lib()
    lib.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    cap = 0
    while lib.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:  # up to the last capability (EINVAL), or EPERM: none held
        cap += 1
    header, data = (ctypes.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0), (ctypes.c_uint32 * 6)()
    _syscall_ok(lib.capset(header, data), "capset")


def _place_verdict_fds(cfg: dict) -> None:
    """The verdict channel's two fds (when the evaluator passed them) moved to ``VERDICT_FD`` and ``TOKEN_FD``,
    where the harness's reporter expects them; the status pipe moved out of their way first."""
    import fcntl

    fds = cfg.get("verdict_fds")
    if not fds:
        return
    if cfg["status_fd"] in (VERDICT_FD, TOKEN_FD):
        old, cfg["status_fd"] = cfg["status_fd"], fcntl.fcntl(cfg["status_fd"], fcntl.F_DUPFD, 512)
        os.close(old)
    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD, 512) for fd in fds]
    for fd in fds:
        os.close(fd)
    for src, dst in zip(moved, (VERDICT_FD, TOKEN_FD)):
        os.dup2(src, dst)
        os.close(src)
    cfg["verdict_fds"] = [VERDICT_FD, TOKEN_FD]


def _reporter():
    """The harness's one way to send its results: ``__rleif_report(value)`` encodes the plain ``value`` as JSON,
    reads the run's token (32 bytes, once), signs the JSON with it (HMAC-SHA256) and writes ``mac hex, newline,
    JSON`` over whatever the result file held. Built before the program's code runs, from C functions only (the
    ``_json`` encoder, the ``_sha256`` hash, ``os``'s calls), so a program that patches json, os, hmac, hashlib,
    sys.exit or print does not reach it. The program never holds the token unless it reads it itself, and then it
    can only sign answers of its own choosing, which returning them would do anyway."""
    import _json

    try:
        from _sha2 import sha256  # Python 3.12 on
    except ImportError:
        from _sha256 import sha256  # not _hashlib: OpenSSL costs 14 ms of every launch

    def refuse(value):
        raise TypeError(f"not plain data: {type(value).__name__}")

    encode = _json.make_encoder({}, refuse, _json.encode_basestring_ascii, None, ": ", ", ", False, False, True)
    join, read, write, close, lseek, truncate = "".join, os.read, os.write, os.close, os.lseek, os.ftruncate
    number, inner, outer = int.from_bytes, int.from_bytes(b"\x36" * 64, "big"), int.from_bytes(b"\x5c" * 64, "big")

    def digest(key: bytes, message: bytes) -> bytes:  # HMAC-SHA256 (RFC 2104) of a key of 64 bytes at most
        key = number(key.ljust(64, b"\0"), "big")
        return sha256((key ^ outer).to_bytes(64, "big") + sha256((key ^ inner).to_bytes(64, "big") + message)
                      .digest()).digest()

    def report(value) -> None:
        payload = join(encode(value, 0)).encode()
        token = b""
        try:
            while len(token) < 32:
                chunk = read(TOKEN_FD, 32 - len(token))
                if not chunk:
                    break
                token += chunk
            close(TOKEN_FD)
        except OSError:
            pass
        data = digest(token, payload).hex().encode() + b"\n" + payload
        lseek(VERDICT_FD, 0, 0)
        truncate(VERDICT_FD, 0)
        while data:
            data = data[write(VERDICT_FD, data):]

    return report


def _report(cfg: dict, key: str, value: str) -> None:
    os.write(cfg["status_fd"], f"{key} {value}\n".encode())


def _launch(cfg: dict) -> None:
    """The launcher's main: build the sandbox around this process, then run the program in it."""
    protections = ["process-group", "temp-dir", "timeout"]
    try:
        _place_verdict_fds(cfg)
        if sys.platform == "linux":  # die with the evaluator (checked after, in case it is already gone)
            _lib().prctl(PR_SET_PDEATHSIG, _signal.SIGKILL, 0, 0, 0)
            if os.getppid() != cfg["parent"]:
                raise OSError("the evaluator exited")
        if cfg["namespaces"]:
            _enter_namespaces()
            protections += ["network-namespace", "pid-namespace"]
            root = _prepare_root(cfg)
            protections += ["minimal-root", "read-only-filesystem", "tmp-quota"]
            # The child is PID 1 of the new PID namespace. On SIGTERM (the evaluator's timeout) the
            # launcher kills it and reaps it, so nothing is left for the host's init to reap.
            _signal.signal(_signal.SIGTERM, lambda *_: os.kill(child, _signal.SIGKILL))
            child = os.fork()
            if child:
                os.close(cfg["status_fd"])
                for fd in cfg.get("verdict_fds") or ():
                    os.close(fd)
                _, status = os.waitpid(child, 0)
                os._exit(os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
            _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
            os.chroot(root)
            os.chdir("/")
            try:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError:
                pass  # no /proc then: the program sees no processes at all
        reporter = _reporter() if cfg.get("verdict_fds") else None  # its C modules loaded before the uid drops
        _restrict(cfg, protections)
        _report(cfg, "protections", " ".join(protections))
        os.close(cfg["status_fd"])  # the program can neither fake nor hold the status pipe
    except BaseException as exc:  # noqa: BLE001 - report why, then fail with the setup code
        _report(cfg, "error", f"{type(exc).__name__}: {exc}".replace("\n", " "))
        os._exit(SETUP_FAILED)
    _run_program(reporter)


def _run_program(reporter) -> None:
    """Run program.py as ``__main__`` the way ``python program.py`` would, with the standard library only."""
    import _sitebuiltins
    import builtins
    import types

    sys.path[:] = [p for p in sys.path if os.path.isdir(p) or p.endswith(".zip")]  # the stdlib, no site-packages
    sys.argv = ["program.py"]
    builtins.exit = _sitebuiltins.Quitter("exit", "Ctrl-D (i.e. EOF)")  # site's exit()/quit(), which -S skips
    builtins.quit = _sitebuiltins.Quitter("quit", "Ctrl-D (i.e. EOF)")
    main = types.ModuleType("__main__")
    main.__file__ = "program.py"
    if reporter is not None:
        main.__dict__["__rleif_report"] = reporter
    sys.modules["__main__"] = main
    with open("program.py", "rb") as f:
        code = compile(f.read(), "program.py", "exec")
    exec(code, main.__dict__)


if __name__ == "__main__":
    _launch(marshal.loads(bytes.fromhex(sys.argv[1])))
    sys.exit(0)
