"""What a sandboxed program's new root shows of the host (``launcher._prepare_root`` builds it): the interpreter,
the standard library and the shared libraries it loads, read only, with every site-packages folder masked."""

from __future__ import annotations

import functools
import os
import sys

LOADER_FILES = ("/etc/ld.so.cache",)  # where the dynamic loader finds libraries at once (10% of a start without it)
LIBRARY_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib")  # libc, libm, libssl, libffi, ...


@functools.lru_cache(maxsize=1)
def root_view() -> tuple[list[str], list[str]]:
    """(what the program's new root shows, read only; what is masked inside it): the interpreter's installation
    and the shared libraries, with every site-packages / dist-packages folder hidden, the evaluator's own
    included (a program that can read the datasets or the kit can read the expected answers)."""
    import glob
    import site
    import sysconfig

    keep = list(dict.fromkeys([sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable)),
                               sysconfig.get_paths()["stdlib"], *[d for d in LIBRARY_DIRS if os.path.isdir(d)],
                               *[f for f in LOADER_FILES if os.path.isfile(f)]]))
    mask = set(site.getsitepackages() + [site.getusersitepackages()])
    for folder in keep:
        for pattern in ("lib/python3*/site-packages", "lib/python3*/dist-packages", "python3*/site-packages",
                        "python3*/dist-packages", "python3/dist-packages", "local/lib/python3*/*-packages",
                        "site-packages", "dist-packages"):
            mask.update(glob.glob(os.path.join(folder, pattern)))
    inside = [m for m in sorted(mask) if any(m == k or m.startswith(k.rstrip("/") + "/") for k in keep)]
    return keep, inside
