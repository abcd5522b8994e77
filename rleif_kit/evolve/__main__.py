"""``python -m rleif_kit.evolve --params FILE [--set ...] [--settings FILE] [--dry-run]``: stage 01 without a
notebook (the same as ``rleif evolve``)."""

from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.evolve.stage import evolve_command


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("evolve", "Run the Evol-Instruct stage without a notebook.", settings=True)
    parser.add_argument("--dry-run", action="store_true", help="estimate requests, tokens and cost; send nothing")
    args = parser.parse_args(argv)
    return evolve_command(args.params, args.overrides, args.settings, args.dry_run)


if __name__ == "__main__":
    raise SystemExit(run_entry_point("evolve", main))
