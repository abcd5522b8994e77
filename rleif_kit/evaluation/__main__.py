"""``python -m rleif_kit.evaluation --params FILE [--set ...] [--limit N] [--settings FILE]``: stage 06 without
a notebook (``rleif eval PARAMS`` is the same, with more options)."""

import json

from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import stage_parser
from rleif_kit.core.stages import EVAL
from rleif_kit.evaluation.stage import run_eval


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("evaluation", "Evaluate a run's models on its benchmarks (stage 06).", settings=True)
    parser.add_argument("--limit", type=int, help="the first N items of each benchmark")
    args = parser.parse_args(argv)
    overrides = args.overrides + ([f"eval.limit={args.limit}"] if args.limit is not None else [])
    cfg, paths = setup(args.params, overrides, stage=EVAL)
    result = run_eval(cfg, paths, load_settings(args.settings) if args.settings else None)
    print(json.dumps(result.summary, indent=2))


if __name__ == "__main__":
    main()
