"""Do the CPU kernel paths change a tiny run, and does pinning them make it repeat? What does pinning cost?

    .venv/bin/python benchmarks/bench_kernel_paths.py [--steps 60] [--repeats 3]

Each variant runs in a fresh process (the kernel-selection variables are read when torch, MKL and oneDNN
first run), on the tiny preset's model and data (params/tiny-cpu.toml, 2 threads): the same tiny Llama, built
once, then ``--steps`` SFT steps of 64 examples. A variant is a set of environment variables:

- what a machine picks by itself: this one (``native``), a CPU without AVX-512 (``imitate-avx2``: torch's
  ``ATEN_CPU_CAPABILITY``, MKL's ``MKL_ENABLE_INSTRUCTIONS`` and oneDNN's ``ONEDNN_MAX_CPU_ISA`` capped at AVX2)
  and one without AVX2 (``imitate-default``);
- the kit's pin (``rleif_kit.core.numerics.PINNED``, ``[base] cpu_kernels = "pinned"``): every library on AVX2,
  MKL's conditional numerical reproducibility ``MKL_CBWR=AVX2`` included.

For each: a digest of the trained weights (equal digests = bit-identical training), the losses, and the median
seconds per SFT step over ``--repeats`` runs, variants interleaved so load drifts hit all alike.
Writes reports/bench/kernel_paths.json and prints a table.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rleif_kit.core.numerics import KERNEL_VARIABLES  # noqa: E402

from rleif_kit.core.numerics import IMITATE as CAPS, PINNED  # noqa: E402

# what a machine picks by itself: this one, a CPU without AVX-512 and one without AVX2 (capping every library)
IMITATE = {"native": {}, "imitate-avx2": CAPS["avx2"], "imitate-default": CAPS["default"]}


def variants() -> dict[str, dict[str, str]]:
    """The machines' own choices and the kit's pin (what ``[base] cpu_kernels = "pinned"`` sets on any CPU with
    AVX2; a CPU without AVX2 gets nothing set, so the pin is not imitated on ``imitate-default``)."""
    return {**IMITATE, "pinned": dict(PINNED), "pinned-over-inherited-caps": {**IMITATE["imitate-avx2"], **PINNED}}


def child(args: argparse.Namespace) -> None:
    """One SFT run in this process; prints a JSON line."""
    import torch  # heavy: loaded on first use

    from rleif_kit.core.run_setup import setup
    from rleif_kit.sft.examples import build_sft_examples
    from rleif_kit.sft.stage import train_sft

    run = Path(args.run)
    cfg, paths = setup(str(ROOT / "params" / "tiny-cpu.toml"),
                       [f'base.output_dir="{run}"', f'base.model_name="{args.base}"', f"sft.max_steps={args.steps}",
                        "sft.logging_steps=5", "sft.eval_samples=0", f"sft.save_steps={args.steps * 10}",
                        'base.report_to=["none"]', 'base.cpu_kernels="native"'],  # the variant's env decides
                       stage="03_sft", report_dir=str(run / "reports"), workdir=str(ROOT))
    examples = build_sft_examples(cfg, paths)
    stamps = _time_steps()
    trainer, _, _ = train_sft(cfg, paths, examples, args.base)
    seconds = (stamps[-1] - stamps[0]) * args.steps / (len(stamps) - 1)  # steps 2..N: tokenising and set-up left out
    digest = hashlib.sha256()
    for name, p in sorted(trainer.model.named_parameters()):
        digest.update(name.encode() + p.detach().contiguous().numpy().tobytes())
    losses = [json.loads(line)["loss"] for line in paths.sft_log.read_text().splitlines() if '"loss"' in line]
    print(json.dumps({"digest": digest.hexdigest()[:16], "losses": losses, "seconds_per_step": seconds / args.steps,
                      "capability": torch.backends.cpu.get_cpu_capability()}))


def _time_steps() -> list[float]:
    """The kit's SFT log callback, also stamping the end of every optimizer step."""
    from rleif_kit.sft import stage

    stamps: list[float] = []
    made = stage._log_callback

    def timed(path):
        callback = made(path)

        class Timed(type(callback)):
            def on_step_end(self, args, state, control, **kwargs):
                stamps.append(time.perf_counter())

        return Timed()

    stage._log_callback = timed
    return stamps


def build_base(work: Path) -> Path:
    """The tiny preset's model, built once in a child with the machine's defaults."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from rleif_kit.core.run_setup import setup\n"
            "from rleif_kit.worlds.tiny_corpus import ensure_base_model\n"
            "cfg, _ = setup(%r, ['base.output_dir=\"%s\"', 'base.model_name=\"%s/tiny-llama\"'], stage='03_sft',"
            " report_dir=%r, workdir=%r)\n"
            "print(ensure_base_model(cfg))\n") % (str(ROOT), str(ROOT / "params" / "tiny-cpu.toml"), work, work,
                                                 str(work / "reports"), str(ROOT))
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, env=clean_env({}))
    return work / "tiny-llama"


def clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KERNEL_VARIABLES}
    env.update(extra)
    return env


def run_variant(name: str, env: dict, base: Path, work: Path, steps: int) -> dict:
    run = work / name.replace("/", "_")
    shutil.rmtree(run, ignore_errors=True)
    out = subprocess.run([sys.executable, __file__, "--child", "--run", str(run), "--base", str(base),
                          "--steps", str(steps)], capture_output=True, text=True, env=clean_env(env))
    if out.returncode:
        raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--variants", default="", help="comma-separated subset (default: all), e.g. native,pinned")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--base", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)
    work = Path(tempfile.mkdtemp(prefix="kernel-paths-"))
    base = build_base(work)
    chosen = {n: e for n, e in variants().items() if not args.variants or n in args.variants.split(",")}
    runs: dict[str, list[dict]] = {name: [] for name in chosen}
    for repeat in range(args.repeats):
        for name, env in chosen.items():
            runs[name].append(run_variant(name, env, base, work, args.steps))
            print(f"repeat {repeat + 1}: {name:24s} {runs[name][-1]['digest']} "
                  f"{runs[name][-1]['seconds_per_step']:.3f} s/step", flush=True)
    result = {"steps": args.steps, "repeats": args.repeats, "machine": platform.processor() or platform.machine(),
              "cpu": _cpu_model(), "variants": {}}
    for name, rs in runs.items():
        result["variants"][name] = {
            "env": chosen[name], "capability": rs[0]["capability"], "digest": rs[0]["digest"],
            "repeats_identical": len({r["digest"] for r in rs}) == 1, "losses": rs[0]["losses"],
            "median_seconds_per_step": round(statistics.median(r["seconds_per_step"] for r in rs), 4)}
    native = result["variants"].get("native", {}).get("median_seconds_per_step")
    for name, x in result["variants"].items():
        x["time_vs_native"] = round(x["median_seconds_per_step"] / native, 3) if native else None
    v = {n: x["digest"] for n, x in result["variants"].items()}
    result["repeats_identical"] = all(x["repeats_identical"] for x in result["variants"].values())
    for key, a, b in (("pin_changes_this_machine", "pinned", "native"),
                      ("pinned_equals_an_avx2_cpu", "pinned", "imitate-avx2"),
                      ("pinned_equals_pinned_over_a_cap", "pinned", "pinned-over-inherited-caps")):
        if a in v and b in v:
            result[key] = (v[a] != v[b]) if key == "pin_changes_this_machine" else (v[a] == v[b])
    out = ROOT / "reports" / "bench" / "kernel_paths.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    for name, x in result["variants"].items():
        print(f"{name:28s} {x['capability']:8s} {x['digest']} last loss {x['losses'][-1]:.6f} "
              f"{x['median_seconds_per_step']:.3f} s/step ({x['time_vs_native']}x native)")
    print({k: result[k] for k in ("repeats_identical", "pin_changes_this_machine", "pinned_equals_an_avx2_cpu",
                                  "pinned_equals_pinned_over_a_cap") if k in result})
    print(f"wrote {out}")
    shutil.rmtree(work, ignore_errors=True)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


if __name__ == "__main__":
    main()
