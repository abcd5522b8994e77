"""Which CPU kernels a run computes with: the machine's own choice, or one fixed set (``[base] cpu_kernels``).

Why: torch, MKL and oneDNN each pick their kernels by the CPU they find, and kernels that round differently
make a tiny random-init model train along another path. The same preset and seed ended SFT at 52.0% on a
2-core AMD EPYC with AVX-512 and at 50.0% on one without it, and a PRM probe at 0.435 against 0.265. Capped
at AVX2, the AVX-512 machine reproduces the other's figures exactly (SFT 50.0%, final loss 0.0935:
benchmarks/bench_kernel_paths.py and docs/testing.md). ``pinned`` therefore asks every library for AVX2, the
widest set every x86-64 CPU of the kit's machines has: a CPU run then repeats on any of them.

The variables are read once, when each library first runs, so :func:`pin` must run before torch is imported:
``setup()`` calls it first thing, and a process that imported torch earlier gets a note instead.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

KERNEL_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA")

AVX2_FLAGS = frozenset({"avx2", "fma"})

# torch's own vectorised kernels (ATen), oneDNN's and MKL's, all on their AVX2 code. MKL_CBWR is MKL's conditional
# numerical reproducibility: the AVX2 branch on every Intel CPU (on AMD, MKL answers AUTO: its own AVX2 code, which
# it picks there anyway); MKL_ENABLE_INSTRUCTIONS is set alike so an inherited cap cannot contradict it.
PINNED = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
          "ONEDNN_MAX_CPU_ISA": "AVX2"}

# What a CPU picks by itself when it lacks AVX-512 ("avx2") or AVX2 ("default"), imitated on a larger CPU by capping
# each library: how the benchmark, the spread tool and the tests compute as those machines would.
IMITATE = {"avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
           "default": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                       "ONEDNN_MAX_CPU_ISA": "SSE41"}}

MODES = ("native", "pinned")


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (Linux ``/proc/cpuinfo``; empty elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def can_pin(flags: frozenset[str] | None = None) -> bool:
    """Whether the CPU has AVX2 (and FMA): False on another architecture or an older x86 CPU, where nothing is set."""
    return AVX2_FLAGS <= (cpu_flags() if flags is None else flags)


def kernel_environment(mode: str, flags: frozenset[str] | None = None) -> dict[str, str]:
    """The variables ``mode`` sets on a CPU with ``flags`` ({} for ``native``: the machine's own choice)."""
    if mode not in MODES:
        raise ValueError(f"cpu_kernels must be one of {MODES}, got {mode!r}")
    return dict(PINNED) if mode == "pinned" and can_pin(flags) else {}


def pin(mode: str) -> str | None:
    """Set ``mode``'s variables in this process's environment (inherited by the processes it starts); returns a
    note when torch is already loaded with other kernels, so the pin can no longer take effect here."""
    wanted = kernel_environment(mode)
    differs = {k: v for k, v in wanted.items() if os.environ.get(k) != v}
    os.environ.update(wanted)
    if differs and "torch" in sys.modules:
        return (f"note: [base] cpu_kernels = {mode!r} came after torch was loaded, so this process keeps the kernels "
                f"it started with ({', '.join(sorted(differs))} differed); restart the kernel and run setup() "
                "before importing torch for figures that repeat")
    return None


def describe() -> dict:
    """What this process computes with, for the run manifest: the variables set and torch's capability."""
    out = {k: os.environ[k] for k in KERNEL_VARIABLES if k in os.environ}
    if "torch" in sys.modules:
        out["torch_capability"] = sys.modules["torch"].backends.cpu.get_cpu_capability()
    return out
