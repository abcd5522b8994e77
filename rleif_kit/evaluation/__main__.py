"""``python -m rleif_kit.evaluation --params FILE [--set ...] [--limit N] [--settings FILE]``: stage 06 without
a notebook, the same as ``rleif eval PARAMS`` (which has more options); exit status 1 while items are pending."""

from types import SimpleNamespace

from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.evaluation.commands import run_stage


def main(argv: list[str] | None = None) -> int:
    parser = stage_parser("evaluation", "Evaluate a run's models on its benchmarks (stage 06).", settings=True)
    parser.add_argument("--limit", type=int, help="the first N items of each benchmark")
    args = parser.parse_args(argv)
    settings = load_settings(args.settings) if args.settings else None
    return run_stage(SimpleNamespace(target=args.params, overrides=args.overrides, limit=args.limit, backend=None),
                     settings)


if __name__ == "__main__":
    raise SystemExit(run_entry_point("evaluation", main))
