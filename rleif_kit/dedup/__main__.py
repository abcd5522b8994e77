"""``python -m rleif_kit.dedup --params FILE [--set ...] [--settings FILE]``: stage 02 without a notebook —
dedup, decontamination and the SFT data file, with the stage's verdicts."""

from rleif_kit.checks.verdicts import format_verdicts
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import DEDUP
from rleif_kit.dedup.stage import run_dedup


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("dedup", "Deduplicate and decontaminate the evolved instructions; build the SFT data.",
                          settings=True)
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=DEDUP)
    result = run_dedup(cfg, paths, load_settings(args.settings) if args.settings else None)
    print(f"kept {result.kept} of {result.total} ({result.removed_share:.1%} removed: {result.removed_by_layer}); "
          f"SFT rows: {result.sft.get('rows')}")
    print(format_verdicts(result.verdicts))


if __name__ == "__main__":
    raise SystemExit(run_entry_point("dedup", main))
