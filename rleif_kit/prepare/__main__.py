"""``python -m rleif_kit.prepare --params FILE [--set ...] [--settings FILE]``: stage 00 without a notebook — the base
model, the data later stages read and one chat round trip per configured endpoint (``rleif data`` runs the data step
alone)."""

from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import SETUP
from rleif_kit.prepare.stage import run_prepare


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("prepare", "Resolve the base model, build the data and check the endpoints (stage 00).",
                          settings=True)
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=SETUP)
    result = run_prepare(cfg, paths, load_settings(args.settings) if args.settings else None)
    print(f"base model: {result.base_model}")
    print(result.data.table())
    print(result.endpoint_table)


if __name__ == "__main__":
    raise SystemExit(run_entry_point("prepare", main))
