"""``python -m rleif_kit.ppo --params FILE [--set ...]``: stage 05 without a notebook (PPO, or GRPO with
``[ppo] algorithm = "grpo"``); ``accelerate launch -m rleif_kit.ppo`` runs our loop under DDP."""

from pathlib import Path

from rleif_kit.checks.verdicts import format_verdicts
from rleif_kit.core import distributed as dist
from rleif_kit.core.launch import save_result
from rleif_kit.core.run_setup import setup
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import PPO
from rleif_kit.ppo.policy import load_policy
from rleif_kit.ppo.stage import export, train
from rleif_kit.ppo.trainer import RewardGateFailed, load_gate
from rleif_kit.rewards.reward import RewardScorer
from rleif_kit.worlds.data import instruction_pool


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("ppo", "Run PPO (or GRPO) without a notebook.")
    parser.add_argument("--gate", default=None, help="gate.json of a gate already run (skips running it again)")
    parser.add_argument("--no-export", action="store_true", help="leave 05_ppo/model and the KL-guard verdict "
                                                                "to the caller (a notebook)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=PPO)
    dist.accelerator()  # under accelerate launch: join the ranks and pick this rank's GPU before loading models
    policy = load_policy(cfg, paths)
    gate = load_gate(Path(args.gate)) if args.gate else None
    try:
        policy, result = train(cfg, paths, instruction_pool(cfg, paths), RewardScorer(cfg, paths), policy, gate,
                               progress=True)
    except RewardGateFailed as e:
        print(format_verdicts(e.verdicts))
        raise SystemExit(f"ppo: {e}") from None
    if dist.is_main():
        save_result(result, paths.ppo_result)  # what a notebook with launcher = accelerate reads
        print(format_verdicts(result.gate))
    if args.no_export:  # a notebook reads result.json (a KL-guard stop included) and exports itself
        return
    if result.stopped:
        raise SystemExit(f"ppo: {result.stopped}")
    model = export(cfg, paths, policy, result)
    if dist.is_main():
        print(f"PPO done: {result.steps} steps in {result.runtime_s:.0f}s; model at {model}")


if __name__ == "__main__":
    raise SystemExit(run_entry_point("ppo", main))
