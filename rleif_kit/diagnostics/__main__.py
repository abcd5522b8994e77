"""``python -m rleif_kit.diagnostics --params FILE [--set ...] [--no-score]``: stage 07 without a notebook —
every reward-health check whose artifacts exist (``run_diagnostics``, as the notebook calls it), printed as one table
and written to ``07_reward_diagnostics/verdicts.json``."""

from rleif_kit.checks.verdicts import format_verdict_table
from rleif_kit.core.run_setup import setup
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import DIAGNOSTICS
from rleif_kit.diagnostics.stage import run_diagnostics


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("diagnostics", "Run every reward-health check on a run's artifacts (stage 07).")
    parser.add_argument("--no-score", action="store_true", help="skip check 1 (loading the reward models)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=DIAGNOSTICS)
    report = run_diagnostics(cfg, paths, score=not args.no_score)
    print(format_verdict_table(report.verdicts))
    print("\n".join(f"skipped {note}" for note in report.skipped))


if __name__ == "__main__":
    raise SystemExit(run_entry_point("diagnostics", main))
