"""``python -m rleif_kit.rewards --params FILE [--set ...] [--settings FILE]``: stage 04 without a notebook
(``accelerate launch -m`` too: rank 0 builds the data and scores, every rank trains). With ``--only irm|prm`` it
trains that one model on the rows already in ``04_reward_models/``: what a notebook's ``train_irm`` / ``train_prm``
start under ``[base] launcher = "accelerate"`` (``launched.py``)."""

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.jsonl import read_jsonl
from rleif_kit.core.launch import save_result
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.rewards.irm import train_irm
from rleif_kit.rewards.launched import TRAINED
from rleif_kit.rewards.prm import train_prm
from rleif_kit.rewards.rm_datasets import training_examples
from rleif_kit.rewards.stage import run_rewards


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("rewards", "Train the IRM and the PRM without a notebook.", settings=True)
    parser.add_argument("--only", choices=TRAINED,
                        help="train only this model, on the rows already in 04_reward_models/ (what a notebook "
                             "with [base] launcher = \"accelerate\" runs)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=REWARD_MODELS)
    if args.only:
        train_launched(cfg, paths, args.only)
        return
    run = run_rewards(cfg, paths, load_settings(args.settings) if args.settings else None)
    if dist.is_main():
        save_result(run.irm, paths.rm_result("irm"))
        save_result(run.prm, paths.rm_result("prm"))
        print(run.summary())


def train_launched(cfg: RunConfig, paths: RunPaths, which: str) -> None:
    """One rank of ``--only which``: every rank reads the rows the notebook wrote and trains; rank 0 saves the result
    the notebook reads back (``core/launch.load_result``)."""
    dist.barrier()  # as the whole stage's ranks wait for rank 0's rows (stage.training_rows)
    rows = training_examples(which, list(read_jsonl(paths.rm_rows(which))))  # every rank, rank 0 too: identical
    train = train_irm if which == "irm" else train_prm
    _, _, result = train(cfg, paths, rows)
    if dist.is_main():
        save_result(result, paths.rm_result(which))
        print(f"IRM: held-out pairwise accuracy {result.heldout_accuracy:.3f} on {result.heldout_pairs} pairs"
              if which == "irm" else
              f"PRM: held-out step accuracy {result.step_accuracy}, AUC {result.step_auc} on "
              f"{result.heldout_steps} steps")


if __name__ == "__main__":
    raise SystemExit(run_entry_point("rewards", main))
