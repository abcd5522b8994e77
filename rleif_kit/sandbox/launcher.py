"""The sandbox's launcher half (see ``sandbox/runner.py``): run as a compiled script, ``python -I -S
sandbox_launcher.pyc CONFIG``, it builds the sandbox around itself (namespaces, file system, uid, rlimits)
and then runs the program in its own interpreter, so each program costs one interpreter start, not two.

It runs before anything else in that process, so it imports only what it needs (marshal for its config, the
C ``_signal`` module, no json or dataclasses) and nothing of rleif_kit.
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


def _copy_result(cfg: dict, root: str) -> None:
    """The program's result file out of its tmpfs into the evaluator's temp dir: a regular file only (never a link
    it planted), at most ``file_bytes``."""
    name = cfg["result_file"]
    try:
        fd = os.open(os.path.join(root + cfg["tmpdir"], name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return
    try:
        import stat

        if stat.S_ISREG(os.fstat(fd).st_mode):
            data = os.read(fd, cfg["limits"]["file_bytes"])
            out = os.open(os.path.join(cfg["tmpdir"], name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                          0o600)
            try:
                os.write(out, data)
            finally:
                os.close(out)
    finally:
        os.close(fd)


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


def _report(cfg: dict, key: str, value: str) -> None:
    os.write(cfg["status_fd"], f"{key} {value}\n".encode())


def _launch(cfg: dict) -> None:
    """The launcher's main: build the sandbox around this process, then run the program in it."""
    protections = ["process-group", "temp-dir", "timeout"]
    try:
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
                _, status = os.waitpid(child, 0)
                _copy_result(cfg, root)
                os._exit(os.waitstatus_to_exitcode(status) % 256 if os.WIFEXITED(status) else 128 + os.WTERMSIG(status))
            _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
            os.chroot(root)
            os.chdir("/")
            try:
                _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
            except OSError:
                pass  # no /proc then: the program sees no processes at all
        _restrict(cfg, protections)
        _report(cfg, "protections", " ".join(protections))
        os.close(cfg["status_fd"])  # the program can neither fake nor hold the status pipe
    except BaseException as exc:  # noqa: BLE001 - report why, then fail with the setup code
        _report(cfg, "error", f"{type(exc).__name__}: {exc}".replace("\n", " "))
        os._exit(SETUP_FAILED)
    _run_program(cfg)


def _run_program(cfg: dict) -> None:
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
    sys.modules["__main__"] = main
    with open("program.py", "rb") as f:
        code = compile(f.read(), "program.py", "exec")
    exec(code, main.__dict__)


if __name__ == "__main__":
    _launch(marshal.loads(bytes.fromhex(sys.argv[1])))
    sys.exit(0)
