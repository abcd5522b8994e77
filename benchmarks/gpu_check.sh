#!/usr/bin/env bash
# GPU check of the 7B recipe, at most 4 minutes so it can be rerun: QLoRA SFT tokens/s and peak memory
# at 2048 tokens, one PPO step's peak with both 4-bit reward models loaded, and the memory planner's
# error against those peaks, on random-init models of Llama-2-7B's shape (no download).
# Writes reports/bench/gpu.json (after each part). Arguments pass through, e.g.
#   benchmarks/gpu_check.sh --params params/wizardmath-7b.toml --steps 5
# Without a CUDA GPU it stops with one line; `--dry-run` runs the same code on a tiny shape on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=python3
exec timeout --signal=INT --kill-after=10 240 "$PYTHON" benchmarks/gpu_check.py "$@"
