"""``python -m rleif_kit.sft --params FILE [--set ...]``: stage 03 without a notebook; ``accelerate launch -m
rleif_kit.sft`` runs it on every rank (rank 0 writes)."""

from rleif_kit.core import distributed as dist
from rleif_kit.core.launch import save_result
from rleif_kit.core.run_setup import setup
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import SFT
from rleif_kit.sft.stage import run_sft


def main(argv: list[str] | None = None) -> None:
    args = stage_parser("sft", "Run the SFT stage without a notebook.").parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=SFT)
    result = run_sft(cfg, paths)
    if not dist.is_main():
        return
    save_result(result, paths.sft_result)  # what a notebook with launcher = accelerate reads
    print(f"SFT done: {result.steps} steps in {result.runtime_s:.0f}s; model at {result.model_dir}")
    for v in result.verdicts:
        print(v.line())


if __name__ == "__main__":
    raise SystemExit(run_entry_point("sft", main))
