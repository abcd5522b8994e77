"""[base] cpu_kernels: which CPU kernels a run computes with (rleif_kit/core/numerics.py).

The pure part: which CPUs get which variables, by hand. The part that needs processes of its own (the libraries
read the variables once, when they first run): a short SFT on the tiny model in fresh processes, with this
machine's own kernels, with those of a CPU without AVX-512 (imitated), and pinned.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core import numerics

ZEN5 = frozenset("fpu sse2 avx avx2 fma avx512f avx512dq avx512bw avx512vl avx512_bf16".split())
HASWELL = frozenset("fpu sse2 avx avx2 fma".split())
SANDY_BRIDGE = frozenset("fpu sse2 avx".split())


def test_every_cpu_with_avx2_gets_the_same_kernel_set():
    pinned = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
              "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert numerics.kernel_environment("pinned", ZEN5) == numerics.kernel_environment("pinned", HASWELL) == pinned
    assert numerics.kernel_environment("pinned", HASWELL - {"fma"}) == {}  # AVX2 without FMA: nothing to pin
    assert numerics.kernel_environment("pinned", SANDY_BRIDGE) == {}  # no AVX2: nothing the kit can pin
    assert numerics.kernel_environment("pinned", frozenset()) == {}  # another architecture
    assert numerics.kernel_environment("native", ZEN5) == {}  # the machine's own choice
    assert set(pinned) == set(numerics.KERNEL_VARIABLES)  # every variable, so nothing inherited contradicts it
    with pytest.raises(ValueError, match="cpu_kernels must be one of"):
        numerics.kernel_environment("fast")


def test_a_pin_after_torch_loaded_says_it_cannot_take_effect(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k not in numerics.KERNEL_VARIABLES}
    monkeypatch.setattr(numerics.os, "environ", env)  # this process's real environment stays as it is
    monkeypatch.setattr(numerics, "cpu_flags", lambda: ZEN5)
    monkeypatch.setitem(sys.modules, "torch", sys.modules.get("torch", object()))
    note = numerics.pin("pinned")
    assert note.startswith("note:") and "restart the kernel" in note and "MKL_CBWR" in note, note
    assert env["MKL_CBWR"] == "AVX2"  # set all the same, for the processes it starts
    assert numerics.pin("pinned") is None  # already as wanted: nothing to say
    assert numerics.pin("native") is None  # native sets nothing
    monkeypatch.delitem(sys.modules, "torch")
    env.clear()
    assert numerics.pin("pinned") is None and env["ATEN_CPU_CAPABILITY"] == "avx2"  # before torch: it takes


def test_the_config_key_is_validated(tiny_cfg):
    from rleif_kit.core.config import ConfigError

    with pytest.raises(ConfigError, match="cpu_kernels"):
        tiny_cfg('base.cpu_kernels="fastest"')


SFT = """
import json, sys
from rleif_kit.core.run_setup import setup
from rleif_kit.sft.examples import build_sft_examples
from rleif_kit.sft.stage import train_sft
from rleif_kit.worlds.tiny_corpus import ensure_base_model
cfg, paths = setup(sys.argv[1], json.loads(sys.argv[2]), stage="03_sft", report_dir=sys.argv[3], workdir=sys.argv[4])
trainer, _, _ = train_sft(cfg, paths, build_sft_examples(cfg, paths), ensure_base_model(cfg))
import hashlib, torch
digest = hashlib.sha256()
for name, p in sorted(trainer.model.named_parameters()):
    digest.update(name.encode() + p.detach().contiguous().numpy().tobytes())
losses = [json.loads(line)["loss"] for line in paths.sft_log.read_text().splitlines() if '"loss"' in line]
print(json.dumps({"losses": losses, "weights": digest.hexdigest(),
                  "capability": torch.backends.cpu.get_cpu_capability()}))
"""
FAST = ("sft.dataset=\"arith:400\"", "sft.eval_samples=0", "sft.logging_steps=1", "sft.batch_size=16",
        "sft.open_domain_samples=4", "tiny.corpus_problems=300", "tiny.vocab_size=400", "tiny.hidden_size=64",
        "tiny.intermediate_size=128", "sft.max_steps=6", 'base.report_to=["none"]')
AS_AVX2_CPU = numerics.IMITATE["avx2"]


def _sft(tmp_path, name: str, mode: str, env: dict) -> dict:
    run = tmp_path / name
    clean = {k: v for k, v in os.environ.items() if k not in numerics.KERNEL_VARIABLES}
    overrides = tiny_overrides(run / "run", *FAST, f'base.cpu_kernels="{mode}"')
    out = subprocess.run([sys.executable, "-c", SFT, str(TINY_PARAMS), json.dumps(overrides), str(run / "reports"),
                          str(ROOT)], capture_output=True, text=True, env={**clean, **env}, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _has_avx512() -> bool:
    return {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= numerics.cpu_flags()


@pytest.mark.slow
@pytest.mark.skipif(not _has_avx512(), reason="needs a CPU with AVX-512, whose own kernels differ from the pinned ones")
def test_pinned_kernels_compute_what_a_cpu_without_avx512_computes(tmp_path):
    """On this AVX-512 machine, pinned: the trained weights and losses of a CPU without AVX-512 (imitated), to the
    last bit, also when the environment it inherits says otherwise; native: other weights (the kernels matter, so
    the check can fail; over 6 steps of this small model the logged losses still agree, the weights do not)."""
    native = _sft(tmp_path, "native", "native", {})
    avx2_cpu = _sft(tmp_path, "avx2-cpu", "native", AS_AVX2_CPU)
    assert native["capability"] == "AVX512" and avx2_cpu["capability"] == "AVX2"
    assert native["weights"] != avx2_cpu["weights"]
    pinned = _sft(tmp_path, "pinned", "pinned", {})
    inherited = _sft(tmp_path, "pinned-inherited", "pinned", {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "AUTO"})
    assert pinned["capability"] == inherited["capability"] == "AVX2"
    assert pinned["weights"] == avx2_cpu["weights"] == inherited["weights"]
    assert len(pinned["losses"]) == 6 and pinned["losses"] == avx2_cpu["losses"] == inherited["losses"]
