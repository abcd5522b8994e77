"""``plot_*(data) -> Figure``: plotting only, no computation beyond what a chart needs.

Figures are also saved as PNG under ``reports/<run>/figures/`` (``save_figure``) so the run's
HTML report can show them without a kernel. A PPO run's steps get two figures beside its curves: where each step's
seconds went, and the update's own diagnostics (computed by the trainer, read from ``05_ppo/log.jsonl``).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from rleif_kit.core.verdict import STATUS_COLORS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


class _Pyplot:
    """``matplotlib.pyplot``, imported at the first plot: every stage module offers its notebook's plots, and the
    CLI imports stage modules (``rleif evolve``, ``rleif eval``), which must not wait for matplotlib."""

    def __getattr__(self, name: str) -> Any:
        import matplotlib.pyplot  # heavy: loaded on first use

        return getattr(matplotlib.pyplot, name)


plt = _Pyplot()


def plot_loss_curve(log: Sequence[dict], title: str = "SFT training loss") -> Figure:
    """Loss (and learning rate, on a second axis) against the optimizer step."""
    rows = [r for r in log if "loss" in r]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([r["step"] for r in rows], [float(r["loss"]) for r in rows], marker=".", color="#1f77b4")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (log scale)")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    if rows and "learning_rate" in rows[0]:
        ax2 = ax.twinx()
        ax2.plot([r["step"] for r in rows], [float(r["learning_rate"]) for r in rows], color="#999", lw=1)
        ax2.set_ylabel("learning rate", color="#777")
    fig.tight_layout()
    return fig


def plot_accuracy_bars(values: dict[str, float], title: str = "Held-out accuracy",
                       intervals: dict[str, Sequence[float]] | None = None, score: str = "accuracy") -> Figure:
    """One bar per model or setting, labelled with its score in percent (``score``: the world's name for it,
    "accuracy", "pass@1"); ``intervals`` ({name: (low, high)}, scores) draws each one's 95% interval as an error
    bar."""
    fig, ax = plt.subplots(figsize=(5, 3.2))
    names, accs = list(values), [100 * float(v) for v in values.values()]
    err = None
    if intervals:
        err = [[max(0.0, a - 100 * intervals[n][0]) if n in intervals else 0 for n, a in zip(names, accs)],
               [max(0.0, 100 * intervals[n][1] - a) if n in intervals else 0 for n, a in zip(names, accs)]]
    bars = ax.bar(names, accs, color=["#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c"][: len(names)], yerr=err,
                  capsize=6, ecolor="#333")
    ax.bar_label(bars, labels=[f"{a:.1f}%" for a in accs], label_type="center", color="white")
    ax.set_ylim(0, 105)
    ax.set_ylabel(f"{score} (%)")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def save_figure(fig: Figure, figures_dir: str | Path, name: str) -> Path:
    """Write ``fig`` as ``<figures_dir>/<name>.png`` and return the path."""
    path = Path(figures_dir) / f"{name}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    return path


def plot_counts(counts: dict, title: str, xlabel: str, kinds: Sequence[str] = ("kept", "eliminated")) -> Figure:
    """Stacked bars of ``{group: {kind: n}}`` — e.g. kept/eliminated per round or per operator."""
    groups = list(counts)
    fig, ax = plt.subplots(figsize=(max(5.0, 0.8 * len(groups) + 2), 3.4))
    bottom = [0] * len(groups)
    colors = {"kept": "#2e7d32", "eliminated": "#c62828", "removed": "#c62828", "failed": "#f9a825"}
    for kind in kinds:
        values = [counts[g].get(kind, 0) for g in groups]
        ax.bar([str(g) for g in groups], values, bottom=bottom, label=kind, color=colors.get(kind))
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel(xlabel)
    ax.set_ylabel("records")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)  # beside the bars, never over them
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    return fig


def plot_reasons(reasons: dict[str, int], title: str = "Why evolutions were eliminated") -> Figure:
    """Horizontal bars, one per elimination reason."""
    fig, ax = plt.subplots(figsize=(6, 0.45 * max(len(reasons), 1) + 1.2))
    names = list(reasons) or ["(none)"]
    ax.barh(names, [reasons.get(n, 0) for n in names], color="#c62828")
    ax.invert_yaxis()
    ax.set_xlabel("evolutions")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def plot_similarity_histogram(similarities: Sequence[float], threshold: float,
                              title: str = "Max similarity to an earlier kept instruction") -> Figure:
    """Where the kept set sits against the dedup threshold (the mass right of the line was removed)."""
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.hist([s for s in similarities], bins=40, range=(0, 1), color="#1f77b4")
    ax.axvline(threshold, color="#c62828", ls="--", label=f"threshold {threshold:g}")
    ax.set_xlabel("cosine similarity")
    ax.set_ylabel("instructions")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_score_histograms(series: dict[str, Sequence[float]], healthy: tuple[float, float],
                          title: str = "Reward-model scores on held-out samples",
                          banded: Sequence[str] | None = None) -> Figure:
    """One histogram per named score list on [0, 1], each mean marked, and the healthy mean band shaded on the
    panels a check holds to it (``banded``; None: every panel) — not on a verifier's rV, whose mean is the share of
    tests passed, not a reward model's calibration."""
    cols = min(2, max(1, len(series)))  # two panels a row: readable at a page's width (the report's, a notebook's)
    rows = -(-max(1, len(series)) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.3 * rows), squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, (name, values) in zip(axes.flat, series.items()):
        if banded is None or name in banded:
            ax.axvspan(*healthy, color="#2e7d32", alpha=0.12, label=f"healthy mean {healthy[0]:g}–{healthy[1]:g}")
        ax.hist(list(values), bins=20, range=(0, 1), color="#1f77b4")
        if values:
            mean = sum(values) / len(values)
            ax.axvline(mean, color="#c62828", ls="--", label=f"mean {mean:.2f}")
        ax.set_xlabel("score")
        ax.set_ylabel("count")
        ax.set_title(name)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_split_histogram(scores: Sequence[float], positive: Sequence[bool], labels: tuple[str, str],
                         title: str) -> Figure:
    """Scores of two classes overlaid: how well a reward model separates good from bad."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    ax.hist([s for s, p in zip(scores, positive) if p], bins=20, range=(0, 1), alpha=0.6, color="#2e7d32",
            label=labels[0])
    ax.hist([s for s, p in zip(scores, positive) if not p], bins=20, range=(0, 1), alpha=0.6, color="#c62828",
            label=labels[1])
    ax.set_xlabel("score")
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


PPO_PANELS = (("reward_mean", "reward r"), ("rI_mean", "mean rI (IRM)"), ("rA_mean", "mean rA (PRM)"),
              ("low_rA_share", "share of rA < 0.5"), ("kl", "KL per sequence"), ("entropy", "entropy per token"),
              ("right_share", "share of samples right (verifier)"))


def _truth_panel(ax, log: Sequence[dict], band: tuple[float, float] | None = None) -> None:
    """AUC of r and of rA over right vs wrong samples per step (the reward-against-truth check), or a note."""
    steps = [r["step"] for r in log]
    if not any(r.get("r_truth_auc") is not None for r in log):
        ax.text(0.5, 0.5, "no verifier judges these samples", ha="center", va="center", transform=ax.transAxes,
                fontsize=9, color="#555")
    else:
        for key, label, color in (("r_truth_auc", "r", "#1f77b4"), ("rA_truth_auc", "rA", "#ff7f0e")):
            ax.plot(steps, [r.get(key) if r.get(key) is not None else float("nan") for r in log], marker=".",
                    color=color, label=label)
        ax.axhline(0.5, color="#777", ls=":", label="chance")
        if band is not None:
            ax.axhline(band[1], color=STATUS_COLORS["ok"], ls="--", label=f"ok from {band[1]:g}")
            ax.axhline(band[0], color=STATUS_COLORS["fail"], ls="--", label=f"fail below {band[0]:g}")
        ax.set_ylim(0, 1.02)
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title("reward vs truth: AUC, right over wrong", fontsize=10)
    ax.set_xlabel("step")
    ax.grid(alpha=0.3)


def smooth(values: Sequence[float], weight: float = 0.8) -> list[float]:
    """TensorBoard's smoothing: an exponential moving average, debiased at the start, skipping gaps (NaN)."""
    out, avg, n = [], 0.0, 0
    for v in values:
        if v != v:  # NaN: nothing logged at this step
            out.append(float("nan"))
            continue
        n += 1
        avg = weight * avg + (1 - weight) * v
        out.append(avg / (1 - weight ** n))
    return out


def plot_ppo_curves(log: Sequence[dict], title: str = "PPO training") -> Figure:
    """One panel per logged quantity against the PPO step — each step's value as faint dots, the smoothed curve
    over it — and reward against truth where a verifier judges the samples. Two panels a row, so the figure reads at
    a page's width (the report shows it at about 1150 px) without zooming."""
    fig, axes = plt.subplots(4, 2, figsize=(11, 11))
    steps = [r["step"] for r in log]
    for ax, (key, label) in zip(axes.flat, PPO_PANELS):
        values = [float(r[key]) if r.get(key) is not None else float("nan") for r in log]
        ax.plot(steps, values, ".", color="#1f77b4", alpha=0.35, markersize=4)
        ax.plot(steps, smooth(values), color="#1f77b4", lw=2)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        if key == "kl":  # why the curve may dip below zero (ppo_math.sequence_kl)
            ax.axhline(0, color="#999", lw=0.8)
            ax.text(0.02, 0.97, "k1 estimate on sampled tokens: unbiased,\nso a batch mean can dip below 0",
                    transform=ax.transAxes, fontsize=7.5, va="top", color="#555")
    _truth_panel(axes.flat[len(PPO_PANELS)], log)
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_eval_bars(accuracy: dict[str, dict[str, float]], title: str = "Accuracy per benchmark (strict)",
                   ylabel: str = "accuracy (%)") -> Figure:
    """Grouped bars: one group per benchmark (or task family), one bar per model (``{model: {group: share}}``);
    ``ylabel`` names the share in the run's words (a code run's pass@1)."""
    models = list(accuracy)
    benches = list(dict.fromkeys(b for m in models for b in accuracy[m]))
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(benches) * max(1, len(models)) / 2 + 2), 3.4))
    width = 0.8 / max(1, len(models))
    colors = ["#9e9e9e", "#1f77b4", "#ff7f0e", "#2ca02c"]
    for i, model in enumerate(models):
        xs = [j + (i - (len(models) - 1) / 2) * width for j in range(len(benches))]
        values = [100 * accuracy[model].get(b, float("nan")) for b in benches]
        bars = ax.bar(xs, values, width, label=model, color=colors[i % len(colors)])
        ax.bar_label(bars, labels=[f"{v:.1f}" if v == v else "" for v in values], fontsize=8)
    ax.set_xticks(range(len(benches)), benches)
    ax.set_ylim(0, 105)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    return fig


def plot_reward_health_curves(log: Sequence[dict], low_ra_band: tuple[float, float], low_ra_steps: int,
                              kl_warn: float, kl_fail: float, title: str = "Reward health during PPO",
                              truth_band: tuple[float, float] | None = None) -> Figure:
    """Reward, share of rA < 0.5 (healthy band shaded over the steps check 2 reads), KL (warn and fail
    lines) and reward against truth (``truth_band`` = fail and ok lines of its AUC) against the PPO step."""
    fig, grid = plt.subplots(2, 2, figsize=(11, 6.6))  # two a row: readable at a page's width
    axes = list(grid.flat)
    _truth_panel(axes[3], log, truth_band)
    steps = [r["step"] for r in log]
    for ax, key, label in zip(axes, ("reward_mean", "low_rA_share", "kl"), ("reward r", "share of rA < 0.5",
                                                                              "KL per sequence")):
        ax.plot(steps, [r.get(key, float("nan")) for r in log], marker=".", color="#1f77b4")
        ax.set_title(label, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    axes[1].axhspan(*low_ra_band, color=STATUS_COLORS["ok"], alpha=0.12,
                    label=f"healthy {low_ra_band[0]:g}–{low_ra_band[1]:g}")
    if steps and max(steps) > low_ra_steps:
        axes[1].axvline(low_ra_steps, color="#777", ls=":", label=f"check 2 reads steps < {low_ra_steps}")
    axes[1].set_ylim(0, 1)
    axes[1].legend(fontsize=8)
    kls = [r["kl"] for r in log if r.get("kl") is not None and r["kl"] == r["kl"]]
    if kls and max(kls) > kl_warn / 2:  # else the lines would flatten the curve: say where they are instead
        axes[2].axhline(kl_warn, color=STATUS_COLORS["warn"], ls="--", label=f"warn {kl_warn:g}")
        axes[2].axhline(kl_fail, color=STATUS_COLORS["fail"], ls="--", label=f"fail {kl_fail:g}")
        axes[2].legend(fontsize=8)
    else:
        axes[2].text(0.02, 0.95, f"warn at {kl_warn:g}, fail at {kl_fail:g} (off the scale)",
                     transform=axes[2].transAxes, va="top", fontsize=8, color="#555")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_probes(verdicts: Sequence[Any], ok_at: float, fail_at: float,
                title: str = "Counterfactual probes: share of pairs the reward moved the right way") -> Figure:
    """One bar per probe verdict (``*_probe_*``): the share of edited pairs that moved the right way, coloured by
    status, with the ok and fail lines and each probe's mean score change written beside its bar."""
    probes = [v for v in verdicts if "_probe_" in v.check]
    fig, ax = plt.subplots(figsize=(8, 0.42 * max(3, len(probes)) + 1.2))
    names = [v.check for v in probes]
    shares = [v.numbers.get("moved_right", 0.0) for v in probes]
    ax.barh(range(len(probes)), shares, color=[STATUS_COLORS[v.status] for v in probes])
    for i, v in enumerate(probes):
        ax.text(min(shares[i], 1.0) + 0.01, i, f"{v.numbers.get('mean_change', 0.0):+.3f}", va="center", fontsize=8)
    ax.axvline(ok_at, color=STATUS_COLORS["ok"], ls="--", label=f"ok from {ok_at:g}")
    ax.axvline(fail_at, color=STATUS_COLORS["fail"], ls="--", label=f"fail at {fail_at:g} or below")
    ax.set_yticks(range(len(probes)), names, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.15)
    ax.set_xlabel("share of pairs moved the right way (label: mean score change)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def plot_gain(gains: dict[str, dict[str, Any]], min_gain: float | None = None,
              title: str = "", score: str = "accuracy") -> Figure:
    """One row per benchmark: the gain as a dot, its 95% interval as a bar; zero and the ok line (``min_gain``)."""
    names = list(gains)
    fig, ax = plt.subplots(figsize=(6.5, 0.6 * max(1, len(names)) + 1.4))
    for i, name in enumerate(names):
        g = gains[name]
        low, high = g.get("ci95") or (g["gain"], g["gain"])
        ax.plot([100 * low, 100 * high], [i, i], color="#1f77b4", lw=4, solid_capstyle="butt")
        ax.plot([100 * g["gain"]], [i], "o", color="#1f77b4", markersize=9)
        ax.annotate(f"{100 * g['gain']:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]", (100 * high, i),
                    xytext=(6, 0), textcoords="offset points", va="center", fontsize=9)
    ax.axvline(0, color="#555", lw=1)
    if min_gain is not None:
        ax.axvline(100 * min_gain, color=STATUS_COLORS["ok"], lw=1, ls="--", label=f"ok at +{100 * min_gain:.1f}")
        ax.legend(loc="lower right", fontsize=8, frameon=False)
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.7, len(names) - 0.3)
    ax.margins(x=0.25)
    ax.set_xlabel("points")
    ax.set_title(title or f"PPO − SFT, {score} points (95% paired-bootstrap interval)", fontsize=10)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


# ------------------------------------------------------------------ a PPO step: its phases and its update

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
