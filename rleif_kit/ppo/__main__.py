"""``python -m rleif_kit.ppo --params FILE [--set ...]``: stage 05 without a notebook (PPO, or GRPO with
``[ppo] algorithm = "grpo"``), the same ``run_ppo`` the notebook calls, less the held-out A/B (the notebook's, or
``rleif eval``); ``accelerate launch -m rleif_kit.ppo`` runs our loop under DDP."""

from pathlib import Path

from rleif_kit.checks.verdicts import format_verdicts
from rleif_kit.core import distributed as dist
from rleif_kit.core.launch import save_result
from rleif_kit.core.run_setup import setup
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import PPO
from rleif_kit.ppo.stage import RewardGateFailed, load_gate, run_ppo


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("ppo", "Run PPO (or GRPO) without a notebook.")
    parser.add_argument("--gate", default=None, help="gate.json of a gate already run (skips running it again)")
    parser.add_argument("--no-export", action="store_true", help="train only: leave the A/B, 05_ppo/model and the "
                                                                "KL-guard verdict to the caller (a notebook)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=PPO)
    dist.accelerator()  # under accelerate launch: join the ranks and pick this rank's GPU before loading models
    gate = load_gate(Path(args.gate)) if args.gate else None
    try:
        stage = run_ppo(cfg, paths, gate, evaluate=False, export_model=not args.no_export)  # the A/B: the notebook
    except RewardGateFailed as e:
        print(format_verdicts(e.verdicts))
        raise SystemExit(f"ppo: {e}") from None
    result = stage.result
    if dist.is_main():
        save_result(result, paths.ppo_result)  # what a notebook with launcher = accelerate reads
        print(format_verdicts(stage.verdicts))
    if args.no_export:  # a notebook reads result.json (a KL-guard stop included) and exports itself
        return
    if result.stopped:
        raise SystemExit(f"ppo: {result.stopped}")
    if dist.is_main():
        print(f"PPO done: {result.steps} steps in {result.runtime_s:.0f}s; model at {stage.model_dir}")


if __name__ == "__main__":
    raise SystemExit(run_entry_point("ppo", main))
