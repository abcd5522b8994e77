"""``[base].launcher = "accelerate"``: a notebook's training call runs the stage's module under
``accelerate launch`` in a subprocess, shows its output as it comes, and continues from what it wrote.

The stage functions the notebooks call (``run_sft``, ``train_irm``, ``train_prm``, ``ppo.stage.train``)
start with ``if maybe_launch(...)``: with the default ``launcher = "in_process"`` it returns False and
the function runs as always. Otherwise it runs, in the run's working directory,

    python -m accelerate.commands.launch [--config_file [base].accelerate_config] -m <module> --params <file> --set ...

with the notebook's params file and overrides, and returns True; the caller then loads the results from
disk (the model directory and the ``result.json`` that rank 0 wrote). Inside the launched processes
``RLEIF_LAUNCHED`` is set, so the same functions run in-process there. On a machine without a CUDA GPU
the processes run on the CPU (gloo), which is how the tests run two ranks.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.verdict import Verdict

LAUNCHED = "RLEIF_LAUNCHED"


def launch_command(cfg: Any, module: str, params_path: str | None = None, overrides: Sequence[str] | None = None,
                   args: Sequence[str] = (), accel: dict | None = None) -> list[str]:
    """The ``accelerate launch`` command line that runs ``python -m module`` on this run's config
    (``accel``: the accelerate config file's contents, when the caller has read them already)."""
    cmd = [sys.executable, "-m", "accelerate.commands.launch"]
    if cfg.base.accelerate_config:
        cmd += ["--config_file", str(cfg.resolve(cfg.base.accelerate_config))]
        accel = _accelerate_yaml(cfg) if accel is None else accel
        if "num_processes" not in accel:  # the shipped files fit any machine: one per GPU
            cmd += ["--num_processes", str(_gpus() or 1)]
    cmd += ["-m", module, "--params", params_path or cfg.source]
    for o in cfg.overrides if overrides is None else overrides:
        cmd += ["--set", o]
    return cmd + list(args)


def _accelerate_yaml(cfg: Any) -> dict:
    if not cfg.base.accelerate_config:
        return {}
    import yaml  # heavy: loaded on first use

    return yaml.safe_load(cfg.resolve(cfg.base.accelerate_config).read_text()) or {}


def _gpus() -> int:
    try:
        import torch  # heavy: loaded on first use
    except ImportError:
        return 0
    return torch.cuda.device_count()


def _cpu_only(accel: dict) -> bool:
    """No CUDA GPU here, or the accelerate config asks for the CPU: the ranks must be told (gloo)."""
    return _gpus() == 0 or bool(accel.get("use_cpu"))


def should_launch(cfg: Any) -> bool:
    """``[base].launcher = "accelerate"`` and this is not already a launched process (ours, or a rank of an
    ``accelerate launch`` started by hand, which sets ``LOCAL_RANK``)."""
    return cfg.base.launcher == "accelerate" and not os.environ.get(LAUNCHED) and "LOCAL_RANK" not in os.environ


def maybe_launch(cfg: Any, module: str, params_path: str | None = None, overrides: Sequence[str] | None = None,
                 args: Sequence[str] = ()) -> bool:
    """Run ``module`` under ``accelerate launch`` when ``should_launch``; True when it ran and succeeded,
    False when the caller should run in-process."""
    if not should_launch(cfg):
        return False
    if cfg.base.accelerate_config and not cfg.resolve(cfg.base.accelerate_config).is_file():
        raise FileNotFoundError(f"[base] accelerate_config = {cfg.base.accelerate_config!r}: no such file "
                                f"(looked in {cfg.resolve(cfg.base.accelerate_config)})")
    accel = _accelerate_yaml(cfg)
    cmd = launch_command(cfg, module, params_path, overrides, args, accel)
    env = {**os.environ, LAUNCHED: "1", "PYTHONUNBUFFERED": "1"}
    if _cpu_only(accel):
        env["ACCELERATE_USE_CPU"] = "true"
    print(f"accelerate launch: {shlex.join(cmd[3:])}", flush=True)
    proc = subprocess.Popen(cmd, cwd=cfg.workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    assert proc.stdout is not None
    while chunk := os.read(proc.stdout.fileno(), 65536):  # as it comes: progress bars redraw with \r
        sys.stdout.write(decoder.decode(chunk))
        sys.stdout.flush()
    if proc.wait():
        raise RuntimeError(f"{module} under accelerate launch exited with {proc.returncode} (its output is above)")
    return True


# ------------------------------------------------------------------- results across the process boundary

def save_result(result: Any, path: Path) -> None:
    """A stage's result dataclass as JSON (rank 0, at the end of the module's main); paths as strings."""
    write_json_atomic(path, json.loads(json.dumps(dataclasses.asdict(result), default=str)))


def load_result(cls: type, path: Path) -> Any:
    """``cls`` back from ``save_result``'s JSON: paths as Path, verdict lists as Verdicts."""
    data = json.loads(Path(path).read_text())
    for f in dataclasses.fields(cls):
        value, kind = data.get(f.name), str(f.type)
        if value is not None and "Path" in kind:
            data[f.name] = Path(value)
        elif value is not None and "Verdict" in kind:
            data[f.name] = [Verdict(**v) for v in value]
    return cls(**{k: v for k, v in data.items() if k in {f.name for f in dataclasses.fields(cls)}})
