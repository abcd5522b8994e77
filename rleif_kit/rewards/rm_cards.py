"""The model cards of the IRM and the PRM (``models/cards.py`` renders them): the reward each gives and how to
read it in a few lines of transformers, the input format, the settings and held-out figures, and the dataset
beside the model (``rm_datasets.py``) with its fields."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

from rleif_kit.core import distributed as dist
from rleif_kit.core.config import RunConfig
from rleif_kit.core.paths import RunPaths
from rleif_kit.core.plots import plot_loss_curve, plot_split_histogram
from rleif_kit.core.reward_formula import parse_reward_formula
from rleif_kit.models.cards import (
    ModelCard,
    base_license,
    hub_id,
    irm_usage,
    prm_likelihood_usage,
    prm_usage,
    py_literal,
    recipe_tags,
    render,
    save_figures,
    template_opener,
)
from rleif_kit.rewards.irm_data import programmatic_judge
from rleif_kit.rewards.reward import PRM_LABELS, RM_INFO, solution_step_ends
from rleif_kit.rewards.rm_datasets import PAIR_FIELDS, STEP_FIELDS, fields_markdown
from rleif_kit.worlds import world_for
from rleif_kit.worlds.base import STEP_BY_STEP
from rleif_kit.worlds.words import run_words


def _metadata(cfg: RunConfig, base_name: str, base_location: str, kind: str, pipeline: str) -> dict[str, Any]:
    """Front matter: the hub model the weights come from (the run's base when the reward model starts from SFT)."""
    adapter = cfg.reward_model.rm_finetune != "full"
    root = hub_id(cfg.base.model_name if base_name == "sft" else base_location)
    return {"base_model": root, "base_model_relation": ("adapter" if adapter else "finetune") if root else None,
            "tags": [*recipe_tags(world_for(cfg).recipe), kind, *(["lora"] if adapter else [])],
            "library_name": "peft" if adapter else "transformers", "pipeline_tag": pipeline,
            "license": base_license(base_location)}


def _training(cfg: RunConfig, base_ref: str, base_name: str) -> dict[str, Any]:
    rm, sft = cfg.reward_model, cfg.sft
    rows: dict[str, Any] = {"base model": base_ref if base_name != "sft" else f"the run's SFT model ({base_ref})",
                            "fine-tuning": rm.rm_finetune, "learning rate": rm.rm_lr, "epochs": rm.rm_epochs,
                            "batch": rm.rm_batch_size, "max length (tokens)": rm.rm_max_len,
                            "held-out share": rm.rm_heldout_share, "seed": cfg.base.seed}
    if rm.rm_finetune != "full":
        rows["LoRA r / alpha (from [sft])"] = f"{sft.lora_r} / {sft.lora_alpha}, the new head trained in full"
    return rows


def _files(what: str) -> dict[str, str]:
    return {RM_INFO: f"how the kit loads this folder: `head` ({what}), `finetune`, and `base_model` (what an adapter "
                     "goes on: a path relative to this folder, or a hub id)",
            "figures/": "the figures above"}


def _dataset(paths: RunPaths, which: str, folder: Any, fields: dict[str, str], what: str) -> str:
    data = os.path.relpath(paths.rm_rows(which), folder)
    return (f"`{data}`: {what}, one JSON object per line, the held-out rows included (`split`):\n\n"
            f"{fields_markdown(fields)}\n\n```python\nfrom datasets import load_dataset\n\n"
            f'rows = load_dataset("json", data_files={py_literal(data)})["train"]\n```')


def irm_card(cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
             pairs: Sequence[dict]) -> ModelCard:
    """The IRM's card for ``result`` (an ``IRMResult``); draws its loss curve into the model folder."""
    rm, folder = cfg.reward_model, paths.irm_model
    world = world_for(cfg)
    example = next((p["chosen"] for p in pairs), "Tom has 3 pens. He buys 2 more. How many pens does he have?")
    judge = (f"{run_words(cfg, world).judge}, the {world.name} world's programmatic judge (`World.sibling_quality`)"
             if programmatic_judge(cfg, world) else "the IRM judge (`settings.models.irm_judge`) on definition, "
             "precision and integrity")
    figures = {"training_loss": plot_loss_curve(result.log, "IRM training loss")} if result.log else {}
    return ModelCard(
        title="Instruction reward model (IRM, RLEIF stage 04)",
        summary=("Scores an instruction in [0, 1]: the sigmoid of a one-output reward head, rI in the RLEIF reward "
                 f"`{cfg.ppo.reward_formula}`. It learned from preference pairs of sibling variants evolved from the "
                 f"same instruction with different operators, ranked by {judge}; a ranking of k variants gives "
                 "k(k-1)/2 pairs, balanced across operators. Trained with "
                 "TRL's RewardTrainer (Bradley-Terry loss)."),
        metadata=_metadata(cfg, rm.irm_base, base_location, "reward-model", "text-classification"),
        usage=irm_usage(example, base_ref if rm.rm_finetune != "full" else None),
        prompt=("The instruction text alone, no template around it, ending in the tokenizer's EOS token: TRL's "
                "RewardTrainer appends EOS in training and the head reads the last token before the padding, so a "
                f"scorer must append it too. (The policy's prompt, the {world.name} world's training template, plays "
                "no part here.)"),
        training={**_training(cfg, base_ref, rm.irm_base), "pairs (train / held out)":
                  f"{result.train_pairs} / {result.heldout_pairs}"},
        results={"held-out pairwise accuracy": result.heldout_accuracy,
                 "held-out pairs (unseen sibling groups)": result.heldout_pairs,
                 "runtime (s)": round(result.runtime_s)},
        data=_dataset(paths, "irm", folder, PAIR_FIELDS, "the preference pairs"),
        figures=save_figures(folder, figures),
        files=_files("`sequence`: one score per text"))


def _snippet_form(solution: str, world: Any) -> tuple[list[str], str] | None:
    """(steps, join) of one solution for the card's snippet, such that ``join.join(steps)`` is the solution and each
    step ends (trailing space excluded) where ``world`` ends it: the "Step k:" segments joined by spaces where that
    gives the solution back, else the exact slices of the text (a program: statements and their newlines); None
    when the world finds no step."""
    text = solution.strip()
    ends = solution_step_ends(text, world)
    if not ends:
        return None
    cuts = list(zip([0] + ends[:-1], ends))
    exact = [text[a:b] for a, b in cuts]
    exact[-1] += text[ends[-1]:]
    for steps, join in (([text[a:b].strip() for a, b in cuts], " "), (exact, "")):
        pos, found = 0, []
        for step in steps:
            found.append(pos + len(step.rstrip()))
            pos += len(step) + len(join)
        if all(s.strip() for s in steps) and solution_step_ends(join.join(steps), world) == found:
            return steps, join
    return None


def snippet_steps(examples: Sequence[dict], world: Any = STEP_BY_STEP) -> tuple[str, list[str], str]:
    """(question, steps, join) for the card's snippet: an example whose steps, joined as the snippet joins them,
    are found again where ``world`` ends its steps; preferably one with several steps, right and wrong ones (what a
    PRM is for), else several steps, else any; a fixed example when none is."""
    best, rank = None, -1
    for e in examples:
        form = _snippet_form(e["solution"], world)
        if form is None:
            continue
        steps = form[0]
        r = (len(steps) > 1) + (len(steps) > 1 and len(set(map(bool, e.get("labels", [])))) > 1)
        if r > rank:
            best, rank = (e["question"], *form), r
        if rank == 2:
            break
    return best or ("Tom has 3 pens. He buys 2 more. How many pens does he have?",
                    ["Step 1: 3 + 2 = 5.\nThe answer is: 5"], " ")


def _reads_ra(cfg: RunConfig) -> str:
    """How the run's reward uses the PRM's rA: a sentence for the card."""
    formula, rm = cfg.ppo.reward_formula, cfg.reward_model
    if "rA" in parse_reward_formula(formula).terms and rm.answer_reward == "prm":
        return f"rA in this run's RLEIF reward `{formula}` is the `{rm.prm_aggregate}` of a solution's step scores."
    why = (f"its rA comes from the {rm.answer_reward}" if "rA" in parse_reward_formula(formula).terms
           else "the formula has no rA")
    return (f"As rA it would be the `{rm.prm_aggregate}` of a solution's step scores; this run's reward `{formula}` "
            f"does not read it ({why}), and 07 probes it all the same.")


def prm_card(cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
             examples: Sequence[dict]) -> ModelCard:
    """The PRM's card for ``result`` (a ``PRMResult``); draws its loss curve and held-out step scores."""
    rm, folder = cfg.reward_model, paths.prm_model
    figures = {"training_loss": plot_loss_curve(result.log, "PRM training loss")} if result.log else {}
    if result.heldout_scores:
        figures["heldout_step_scores"] = plot_split_histogram(
            result.heldout_scores, result.heldout_labels, ("correct step", "wrong step"),
            "PRM step scores by label (held out)")
    labeller = (f"the {cfg.base.world} world's step verifier" if rm.prm_step_label == "verifier"
                else "the PRM judge (`settings.models.prm_judge`)")
    world = world_for(cfg)
    question, steps, join = snippet_steps(examples, world)
    template = world.train_template(cot=True)  # the PRM reads the chain-of-thought form
    lead = world.completion("x")[:-1]  # what the world puts between prompt and solution: " " (math), "" (code)
    generative = rm.prm_head == "likelihood"
    adapter_base = base_ref if rm.rm_finetune != "full" else None
    sources = (f"step labels from {labeller}" + (" and the PRM800K-style rows of `[reward_model] prm_data`"
                                                 if rm.prm_data else ""))
    if generative:
        what = ("A generative PRM: a language model of the run's right solutions (the SFT model fine-tuned on those of "
                "its own samples and of the instruction pool that every step label calls right) scores each step by "
                "the lowest log-probability it gives a token of what the step concludes — its result, and for the "
                "last step the rest of the text and its end — and a logistic calibration fitted to the "
                f"labelled steps, {getattr(result, 'calibration', None) or 'in rm_info.json'}, turns that into "
                f"P(right). {_reads_ra(cfg)} Labels: {sources}; a step after the first wrong one is wrong too.")
        usage = prm_likelihood_usage(template, question, steps, _calibration(folder, result), adapter_base, join,
                                     lead)
        files = _files("`likelihood`: a language model, scored with `calibration` = [a, b]")
        reads = ("A step is read over what it concludes: from after its last `=` to its end (the whole step where "
                 "it has none); the last step with the end of the text.")
    else:
        what = ("Says whether each step of a solution is right: a token classifier read at the last token of each "
                f"step, labels {PRM_LABELS} in `config.json`, scores P(right). {_reads_ra(cfg)} It learned from the "
                f"SFT model's own solutions with {sources}; a step after the first wrong one is wrong too. Trained "
                "with `transformers.Trainer` and a collator that puts each label on its step's last token (-100 "
                "elsewhere).")
        usage = prm_usage(template, question, steps, PRM_LABELS, adapter_base, join, lead)
        files = _files("`token`: two classes per token, `wrong` and `right`")
        reads = "A step's label is read at the token covering its last character."
    return ModelCard(
        title="Process reward model (PRM, RLEIF stage 04)",
        summary=what,
        metadata=_metadata(cfg, rm.prm_base, base_location, "process-reward-model",
                           "text-generation" if generative else "token-classification"),
        usage=usage,
        prompt=(f"The {world.name} world's training prompt{template_opener(world, True)}, the question as "
                f"`{{instruction}}`, then {'one space and ' if lead else ''}the solution in the world's answer format "
                f"({world.format_name}), exactly as the policy writes it:\n\n```text\n{template}\n```\n\n"
                f"{world.steps.about} {reads}"),
        training={**_training(cfg, base_ref, rm.prm_base), "step labels": rm.prm_step_label,
                  "solutions (train / held out)": f"{result.train_examples} / {result.heldout_examples}",
                  "labelled steps (train / held out)": f"{result.train_steps} / {result.heldout_steps}",
                  "share of training steps right": result.correct_share},
        results={"held-out step accuracy (threshold 0.5)": result.step_accuracy, "held-out step AUC": result.step_auc,
                 "held-out solutions (unseen questions)": result.heldout_examples,
                 "runtime (s)": round(result.runtime_s)},
        data=_dataset(paths, "prm", folder, STEP_FIELDS, "the labelled solutions"),
        figures=save_figures(folder, figures),
        files=files)


def _calibration(folder: Any, result: Any) -> list[float]:
    """The generative PRM's calibration: the result's, else what the saved folder says."""
    if getattr(result, "calibration", None):
        return list(result.calibration)
    info = Path(folder) / RM_INFO
    return list(json.loads(info.read_text()).get("calibration", [1.0, 0.0])) if info.exists() else [1.0, 0.0]


def readme(build: Any, cfg: RunConfig, paths: RunPaths, result: Any, base_ref: str, base_location: str,
           rows: Sequence[dict]) -> str:
    """The card's text from ``build`` (``irm_card`` / ``prm_card``) on the main rank, which alone draws and writes."""
    return render(build(cfg, paths, result, base_ref, base_location, rows)) if dist.is_main() else ""
