"""Which config keys set a check's thresholds: the report marks a verdict whose threshold the preset moved from the
kit's default by these keys (never by value: two keys can hold the same number).

``THRESHOLD_KEYS``: a check's name, or a pattern with ``*`` (``*_probe_*``: every counterfactual probe), -> the
``section.key`` names its thresholds come from (``checks/verdicts.py``, ``checks/probes.py``, the stages' checks).
"""

from __future__ import annotations

from fnmatch import fnmatchcase

THRESHOLD_KEYS: dict[str, tuple[str, ...]] = {
    "sft_learning": ("diagnostics.sft_min_gain",),
    "step_format": ("diagnostics.step_marker_min_share", "diagnostics.step_marker_sample"),
    "evolve_temperature": ("diagnostics.min_evolve_temperature",),
    "operator_share": ("diagnostics.max_top_operator_share",),
    "kept_floor": ("dedup.min_kept",),
    "duplicate_rate": ("diagnostics.duplicate_share_warn", "diagnostics.duplicate_share_fail"),
    "evolve_failures": ("diagnostics.evolve_failure_warn", "diagnostics.evolve_failure_fail"),
    "*_distribution": ("diagnostics.score_mean_min", "diagnostics.score_mean_max", "diagnostics.score_std_min",
                       "diagnostics.collapse_mean", "diagnostics.collapse_var"),
    "*_probe_*": ("diagnostics.probe_ok", "diagnostics.probe_fail"),
    "low_ra_share": ("diagnostics.low_ra_healthy_min", "diagnostics.low_ra_healthy_max", "diagnostics.low_ra_fail",
                     "diagnostics.low_ra_steps"),
    "kl_blowup": ("diagnostics.kl_warn", "diagnostics.kl_blowup", "diagnostics.kl_steps"),
    "reward_truth": ("diagnostics.truth_auc_ok", "diagnostics.truth_auc_fail"),
    "sft_vs_ppo*": ("diagnostics.ab_min_gain",),
    "value_head": ("diagnostics.value_ev_warn", "diagnostics.value_ev_fail"),
}


def threshold_keys(check: str) -> tuple[str, ...]:
    """The config keys behind ``check``'s thresholds (empty when none are configurable)."""
    return tuple(k for pattern, keys in THRESHOLD_KEYS.items() if fnmatchcase(check, pattern) for k in keys)
