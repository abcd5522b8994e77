"""Two figures of a PPO run's steps beside its curves (``plots.plot_ppo_curves``): where each step's seconds went,
and the update's own diagnostics. Plotting only: the figures are computed by the trainer (``ppo/phases.py``,
``ppo/ppo_math.py``) and read from ``05_ppo/log.jsonl``.
"""

from __future__ import annotations

import statistics
from typing import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

PHASE_LABELS = (("generate_s", "generate"), ("policy_pass_s", "policy pass"), ("ref_pass_s", "reference pass"),
                ("reward_s", "reward (IRM, PRM, verifier)"), ("update_s", "update"), ("checkpoint_s", "checkpoint"))
UPDATE_PANELS = (("approx_kl", "approx. KL of each update (old ‖ new)"),
                 ("clip_frac", "share of tokens clipped"),
                 ("explained_variance", "value head: explained variance"))


def _median(log: Sequence[dict], key: str) -> float | None:
    values = [r[key] for r in log if r.get(key) is not None]
    return statistics.median(values) if values else None


def plot_ppo_phases(log: Sequence[dict], title: str = "Where a PPO step's time goes") -> Figure:
    """Seconds per step stacked by phase, the rest of the step (bookkeeping) on top; the title gives the median
    step, generated tokens per second and the padding ratio of the update's passes. A log without timings (written
    before they were logged) gives a figure that says so."""
    fig, ax = plt.subplots(figsize=(8, 3.8))
    timed = [r for r in log if r.get("step_s") is not None and r.get("generate_s") is not None]
    if not timed:
        ax.text(0.5, 0.5, "this log has no per-phase timings", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    steps = [r["step"] for r in timed]
    bottom = [0.0] * len(timed)
    for key, label in PHASE_LABELS:
        values = [float(r.get(key) or 0.0) for r in timed]
        ax.bar(steps, values, bottom=bottom, width=0.9, label=label)
        bottom = [b + v for b, v in zip(bottom, values)]
    rest = [max(0.0, float(r["step_s"]) - b) for r, b in zip(timed, bottom)]
    ax.bar(steps, rest, bottom=bottom, width=0.9, label="other", color="#cccccc")
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.legend(fontsize=8, ncol=2, loc="upper right")
    parts = [f"median step {_median(timed, 'step_s'):.2f} s"]
    if (tps := _median(timed, "gen_tokens_per_s")) is not None:
        parts.append(f"{tps:,.0f} generated tokens/s")
    if (pad := _median(timed, "pad_ratio")) is not None:
        parts.append(f"update computes {pad:.2f} tokens per real token")
    ax.set_title(f"{title}\n" + " · ".join(parts), fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def plot_update_diagnostics(log: Sequence[dict], title: str = "The update, step by step") -> Figure:
    """approx_kl, the clipped share and the value head's explained variance per step (what cleanrl and TRL log
    beside the KL to the reference): an update that moves too far shows in the first two, a value head that
    predicts nothing in the third (0 = no better than the mean return)."""
    fig, axes = plt.subplots(1, len(UPDATE_PANELS), figsize=(11, 3.2))
    steps = [r["step"] for r in log]
    for ax, (key, label) in zip(axes, UPDATE_PANELS):
        values = [float(r[key]) if r.get(key) is not None else float("nan") for r in log]
        ax.plot(steps, values, ".-", color="#1f77b4", markersize=3, lw=1)
        if key == "explained_variance":
            ax.axhline(0, color="#999", lw=0.8)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
