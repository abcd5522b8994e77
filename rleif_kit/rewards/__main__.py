"""``python -m rleif_kit.rewards --params FILE [--set ...] [--settings FILE]``: stage 04 without a notebook
(``accelerate launch -m`` too: rank 0 builds the data and scores, every rank trains)."""

from rleif_kit.checks.verdicts import format_verdicts
from rleif_kit.core import distributed as dist
from rleif_kit.core.jsonl import read_jsonl, write_jsonl
from rleif_kit.core.launch import save_result
from rleif_kit.core.run_setup import setup
from rleif_kit.core.settings import load_settings
from rleif_kit.core.stage_args import run_entry_point, stage_parser
from rleif_kit.core.stages import REWARD_MODELS
from rleif_kit.rewards.irm import train_irm
from rleif_kit.rewards.launched import TRAINED
from rleif_kit.rewards.prm import train_prm
from rleif_kit.rewards.stage import build_irm_pairs, build_prm_examples, score_sample


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("rewards", "Train the IRM and the PRM without a notebook.", settings=True)
    parser.add_argument("--only", choices=TRAINED,
                        help="train only this model, on the rows already in 04_reward_models/ (what a notebook "
                             "with [base] launcher = \"accelerate\" runs)")
    args = parser.parse_args(argv)
    cfg, paths = setup(args.params, args.overrides, stage=REWARD_MODELS)
    settings = load_settings(args.settings) if args.settings else None
    trained = {}
    for which, build, train in (("irm", build_irm_pairs, train_irm), ("prm", build_prm_examples, train_prm)):
        if args.only not in (None, which):
            continue
        if args.only is None and dist.is_main():  # the data (judges, sampling, files) once, on rank 0
            data = build(cfg, paths, settings)
            # the PRM's rows: the sampled solutions and the train-only extras (prm_hard_negatives), as the notebook
            write_jsonl(paths.rm_rows(which), data.pairs if which == "irm" else data.examples + data.extra)
        dist.barrier()
        rows = list(read_jsonl(paths.rm_rows(which)))  # every rank, rank 0 too: identical inputs
        model, tok, result = train(cfg, paths, rows)
        trained[which] = (model, tok, rows)
        if dist.is_main():
            save_result(result, paths.rm_result(which))
            print(f"IRM: held-out pairwise accuracy {result.heldout_accuracy:.3f} on {result.heldout_pairs} pairs"
                  if which == "irm" else
                  f"PRM: held-out step accuracy {result.step_accuracy}, AUC {result.step_auc} on "
                  f"{result.heldout_steps} steps")
    if args.only is None and dist.is_main():
        (irm_model, irm_tok, _), (prm_model, prm_tok, examples) = trained["irm"], trained["prm"]
        sampled = [e for e in examples if not e.get("train_only")]  # the checks read the sampled solutions only
        print(format_verdicts(score_sample(cfg, paths, (irm_model, irm_tok), (prm_model, prm_tok), sampled).verdicts))


if __name__ == "__main__":
    raise SystemExit(run_entry_point("rewards", main))
