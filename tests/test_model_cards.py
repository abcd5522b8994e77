"""Model cards, the datasets beside the reward models, and the relative references of the info files.

Pure checks on hand-made values, and the three usage snippets run against the kit's own scorers on the small
test model (an untrained head: the snippet must read the same numbers, whatever they are). In-memory or under
pytest's tmp dirs; no network. The training tests run the same checks on the models they train.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from card_checks import absolute_paths_in, front_matter, run_usage

from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.models.cards import (
    ModelCard,
    base_license,
    generation_usage,
    hub_id,
    irm_usage,
    prm_usage,
    render,
    usage_code,
    write_card,
)
from rleif_kit.models.refs import model_ref, relink_adapter, resolve_ref
from rleif_kit.rewards import rm_datasets
from rleif_kit.rewards.reward import PRM_LABELS
from rleif_kit.rewards.rm_cards import irm_card, prm_card, snippet_steps
from rleif_kit.rewards.rm_datasets import PAIR_FIELDS, STEP_FIELDS, pair_rows, step_rows
from rleif_kit.worlds.prompts import MATH_PROMPT_COT, math_prompt

SOLUTION = "Step 1: 4 * 2 = 8. Step 2: 8 / 2 = 4. The answer is: 4"


# ------------------------------------------------------------------ references in info files

def test_model_refs_are_relative_inside_the_run_and_as_given_outside(tmp_path):
    run = tmp_path / "run"
    folder = run / "03_sft" / "model"
    assert model_ref(run / "tiny-llama", folder, run) == "../../tiny-llama"  # up from model/, up from 03_sft/
    assert model_ref(run / "03_sft" / "model", run / "05_ppo" / "model", run) == "../../03_sft/model"
    assert model_ref(run / "tiny-llama", folder, run, given=str(run / "tiny-llama")) == "../../tiny-llama"
    assert model_ref("meta-llama/Llama-2-7b-hf", folder, run) == "meta-llama/Llama-2-7b-hf"  # a hub id stays
    outside = tmp_path / "models" / "base"
    assert model_ref(outside, folder, run, given=str(outside)) == str(outside)  # absolute in the config: kept
    assert model_ref(outside, folder, run, given="./models/base") == "../../../models/base"  # relative: from folder
    assert model_ref(folder / "sub", folder, run) == "./sub"
    assert resolve_ref("../../tiny-llama", folder) == str((run / "tiny-llama").resolve())
    assert resolve_ref("meta-llama/Llama-2-7b-hf", folder) == "meta-llama/Llama-2-7b-hf"
    assert resolve_ref(str(outside), folder) == str(outside)


def test_relink_points_the_adapter_config_at_the_stored_reference(tmp_path):
    (tmp_path / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "/tmp/x/tiny", "r": 4}))
    relink_adapter(tmp_path, "../../tiny-llama")
    assert json.loads((tmp_path / "adapter_config.json").read_text()) == {"base_model_name_or_path": "../../tiny-llama",
                                                                        "r": 4}
    relink_adapter(tmp_path / "none", "x")  # full weights: no adapter config, nothing to do


def test_a_moved_run_resumes_its_evaluation_instead_of_starting_over(tmp_path):
    """06_eval's meta names the run's own model by its path from the meta's folder; a moved run's results are
    still its own (an absolute path would make every one stale and evaluate everything again)."""
    import dataclasses

    from rleif_kit.core.config import EvalConfig
    from rleif_kit.evaluation.stage import evaluate_benchmark
    from rleif_kit.worlds.arith import problems as arith

    class Local:  # a local model's fingerprint: its path and its weights
        name, chunk = "ppo", 4

        def __init__(self, run):
            self.fingerprint, self.asked = {"path": str(run / "05_ppo" / "model"), "weights": [["w", 1, 2]]}, 0

        def complete(self, prompts, ev, stop=(), sample_indices=None):
            self.asked += len(prompts)
            return ["Step 1: it is so. The answer is: 0"] * len(prompts)

    items = [{"id": p["id"], "question": p["question"], "gold": str(p["answer"])}
             for p in arith.generate_problems(3, seed=1)]
    ev, run = dataclasses.replace(EvalConfig(), max_new_tokens=8), tmp_path / "run"
    evaluate_benchmark(Local(run), "arith", items, run / "06_eval" / "ppo" / "arith.jsonl", ev, progress=False,
                       run_dir=run)
    meta = json.loads((run / "06_eval" / "ppo" / "arith.meta.json").read_text())
    assert meta["model"]["path"] == "../../05_ppo/model"  # from 06_eval/ppo/
    moved = tmp_path / "moved"
    run.rename(moved)
    again = Local(moved)
    _, pending, note = evaluate_benchmark(again, "arith", items, moved / "06_eval" / "ppo" / "arith.jsonl", ev,
                                          progress=False, run_dir=moved)
    assert (again.asked, pending, note) == (0, 0, None)  # nothing asked again, nothing moved aside


# ------------------------------------------------------------------ the card's text

def test_card_has_hub_front_matter_and_a_runnable_usage_block(tmp_path):
    card = ModelCard(title="T", summary="What it is.", usage="x = 1 + 1\nprint(x)",
                     metadata={"base_model": "meta-llama/Llama-2-7b-hf", "tags": ["rleif", "wizardmath", "ppo"],
                               "library_name": "transformers", "pipeline_tag": "text-generation", "license": None,
                               "datasets": []},
                     prompt="```text\nPROMPT\n```", training={"learning rate": 2e-5, "targets": ["q_proj", "v_proj"]},
                     results={"AUC": None, "a|b": 0.123456}, figures={"training loss": "figures/training_loss.png"})
    write_card(tmp_path, card)
    meta = front_matter(tmp_path)
    assert (meta.base_model, meta.tags, meta.library_name, meta.pipeline_tag) == (
        "meta-llama/Llama-2-7b-hf", ["rleif", "wizardmath", "ppo"], "transformers", "text-generation")
    assert meta.license is None and meta.datasets is None  # empty values are left out, not written as null
    text = (tmp_path / "README.md").read_text()
    assert text.startswith("---\nbase_model: meta-llama/Llama-2-7b-hf\n") and "\n# T\n\nWhat it is.\n" in text
    assert usage_code(text) == "x = 1 + 1\nprint(x)"
    assert run_usage(tmp_path)["x"] == 2
    assert "| learning rate | 2e-05 |" in text and "| targets | `q_proj`, `v_proj` |" in text
    assert "| AUC | n/a |" in text and "| a\\|b | 0.1235 |" in text  # 4 significant digits; | escaped
    assert "![training loss](figures/training_loss.png)" in text
    assert text.index("## Usage") < text.index("## Prompt format") < text.index("## Training")


def test_hub_ids_and_licenses(tmp_path):
    assert hub_id("meta-llama/Llama-2-7b-hf") == "meta-llama/Llama-2-7b-hf"
    assert [hub_id(x) for x in ("../../tiny-llama", "/models/llama", "./a/b", None)] == [None] * 4
    (tmp_path / "README.md").write_text("---\nlicense: llama2\ntags:\n- x\n---\n# Llama\n")
    assert base_license(tmp_path) == "llama2"
    assert base_license(tmp_path / "missing") is None and base_license("meta-llama/Llama-2-7b-hf") is None


# ------------------------------------------------------------------ the datasets beside the reward models

def test_pairs_and_steps_load_as_hub_datasets_with_the_documented_fields(tmp_path):
    from datasets import load_dataset

    pairs = [{"group": "s1", "chosen": "Add 3 and 4.", "rejected": "Add 3 and.", "chosen_id": "s1-a",
              "rejected_id": "s1-b", "operator": "deepen"}]
    held = [{"group": "s2", "chosen": "Tom has 2 pens.", "rejected": "Tom has pens.", "chosen_id": "s2-a",
             "rejected_id": "s2-c", "operator": "concretize"}]
    write_jsonl(tmp_path / "irm_pairs.jsonl", pair_rows(pairs, held))
    examples = [{"id": "s1-s0", "instruction_id": "s1", "question": "Maya has 4 plants.", "solution": SOLUTION,
                 "labels": [True, False], "source": "verifier"}]
    write_jsonl(tmp_path / "prm_steps.jsonl", step_rows(examples, []))

    ds = load_dataset("json", data_files=str(tmp_path / "irm_pairs.jsonl"), cache_dir=str(tmp_path / "c"))["train"]
    documented = {name for key in PAIR_FIELDS for name in key.split(", ")}
    assert set(ds.column_names) == documented
    assert ds["id"] == ["s1-a>s1-b", "s2-a>s2-c"] and ds["split"] == ["train", "heldout"]
    assert ds[0]["chosen"] == "Add 3 and 4." and ds[1]["group"] == "s2"

    steps = load_dataset("json", data_files=str(tmp_path / "prm_steps.jsonl"), cache_dir=str(tmp_path / "c"))["train"]
    assert set(steps.column_names) == set(STEP_FIELDS)
    row = steps[0]
    assert row["completions"] == ["Step 1: 4 * 2 = 8.", "Step 2: 8 / 2 = 4. The answer is: 4"]  # last: to its answer
    assert row["labels"] == [True, False] and row["split"] == "train" and row["instruction_id"] == "s1"
    for name in documented | set(STEP_FIELDS):  # the module docstring documents every field too
        assert f"``{name}``" in rm_datasets.__doc__, name


def test_the_prm_snippet_example_is_one_whose_steps_it_finds_again():
    lines = {"question": "q1", "solution": "First 3 + 4 = 7.\nThen 7 * 2 = 14.\nThe answer is: 14",
             "labels": [True, False]}  # steps by line: joined by spaces they are one line; shown as exact slices
    one = {"question": "q2", "solution": "Step 1: 3 + 4 = 7. The answer is: 7", "labels": [True]}
    right = {"question": "q3", "solution": SOLUTION, "labels": [True, True]}
    mixed = {"question": "q4", "solution": SOLUTION, "labels": [True, False]}
    steps = ["Step 1: 4 * 2 = 8.", "Step 2: 8 / 2 = 4. The answer is: 4"]
    assert snippet_steps([one, right, mixed]) == ("q4", steps, " ")  # several steps, right and wrong
    assert snippet_steps([one, right]) == ("q3", steps, " ")  # several steps
    assert snippet_steps([one]) == ("q2", ["Step 1: 3 + 4 = 7. The answer is: 7"], " ")
    # one step per line: the exact slices, joined by nothing, give the solution back with its newlines
    assert snippet_steps([one, lines]) == ("q1", ["First 3 + 4 = 7.", "\nThen 7 * 2 = 14.\nThe answer is: 14"], "")


def test_a_programs_snippet_steps_are_exact_slices_the_code_world_ends_where_the_kit_does():
    """A program's steps joined by spaces are not the program: the snippet takes its exact slices, joined by
    nothing, each ending (newline excluded) where the code world ends the step."""
    from rleif_kit.worlds import get_world

    code = get_world("tiny_code")
    program = {"question": "q", "solution": "```python\ndef f(x):\n    y = x + 1\n    return y\n```",
               "labels": [True, False]}
    question, steps, join = snippet_steps([program], code)
    assert (question, join) == ("q", "") and "".join(steps) == program["solution"]
    assert steps == ["```python\ndef f(x):\n    y = x + 1", "\n    return y\n```"]
    assert code.steps.char_ends(program["solution"]) == [len(steps[0]), len(program["solution"])]  # the last: to end


# ------------------------------------------------------------------ the snippets read what the kit reads

def _save(model, tok, folder):
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def test_snippets_score_and_generate_as_the_kit_does(tmp_path, small_model_dir):
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoModelForTokenClassification

    from rleif_kit.models.generation import generate
    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.rewards.reward import head_labels, irm_score, prm_score

    tok = load_tokenizer(str(small_model_dir))
    torch.manual_seed(0)
    prm = AutoModelForTokenClassification.from_pretrained(small_model_dir, num_labels=2, **head_labels("token"))
    prm.config.pad_token_id = tok.pad_token_id
    question = "Maya has 4 plants. She doubles them, then halves them."
    steps = ["Step 1: 4 * 2 = 8.", "Step 2: 8 / 2 = 4. The answer is: 4"]  # SOLUTION's steps
    usage = prm_usage(MATH_PROMPT_COT, question, steps, PRM_LABELS)
    write_card(_save(prm, tok, tmp_path / "prm"), ModelCard("PRM", "", {}, usage))
    ns = run_usage(tmp_path / "prm")
    assert ns["scores"] == pytest.approx(prm_score(prm.eval(), tok, question, " ".join(steps)), abs=1e-5)
    assert ns["model"].config.id2label == {0: "wrong", 1: "right"} and "rA (min over the steps)" in ns["_printed"]

    irm = AutoModelForSequenceClassification.from_pretrained(small_model_dir, num_labels=1)
    irm.config.pad_token_id = tok.pad_token_id
    write_card(_save(irm, tok, tmp_path / "irm"), ModelCard("IRM", "", {}, irm_usage("Tom has 3 pens.")))
    assert run_usage(tmp_path / "irm")["r_i"] == pytest.approx(irm_score(irm, tok, ["Tom has 3 pens."])[0], abs=1e-5)

    lm = AutoModelForCausalLM.from_pretrained(small_model_dir)
    usage = generation_usage(MATH_PROMPT_COT, question, 12)
    write_card(_save(lm, tok, tmp_path / "lm"), ModelCard("LM", "", {}, usage))
    expected = generate(lm, tok, [math_prompt(question, cot=True)], 12, progress=False)[0]
    assert run_usage(tmp_path / "lm")["response"] == expected


@pytest.mark.parametrize("head, pipeline", [("token", "token-classification"), ("likelihood", "text-generation")])
def test_reward_model_cards_name_their_kind_data_and_base_without_the_tmp_root(tiny_cfg, tmp_path, head, pipeline):
    cfg, paths = tiny_cfg("reward_model.rm_finetune=\"lora\"", f'reward_model.prm_head="{head}"',
                          stage="04_reward_models")
    ref = model_ref(paths.sft_model, paths.prm_model, paths.output_dir)
    prm = SimpleNamespace(log=[{"loss": 0.7, "step": 1}, {"loss": 0.5, "step": 2}], heldout_scores=[0.9, 0.2],
                          heldout_labels=[True, False], train_examples=3, heldout_examples=1, train_steps=6,
                          heldout_steps=2, correct_share=0.5, step_accuracy=1.0, step_auc=1.0, runtime_s=2.0,
                          calibration=[2.5, 7.0])
    text = render(prm_card(cfg, paths, prm, ref, str(paths.sft_model), [{"question": "q", "solution": SOLUTION}]))
    meta = front_matter_of(text, tmp_path)
    assert (meta.pipeline_tag, meta.library_name) == (pipeline, "peft")
    assert ("[2.5, 7.0]" in text) == (head == "likelihood")  # the calibration a generative PRM is read with
    assert {"rleif", "wizardmath", "process-reward-model", "lora"} <= set(meta.tags)
    assert "`../prm_steps.jsonl`" in text and "../../03_sft/model" in text and MATH_PROMPT_COT in text
    assert (paths.prm_model / "figures" / "training_loss.png").exists()
    assert (paths.prm_model / "figures" / "heldout_step_scores.png").exists()

    irm = SimpleNamespace(log=[], train_pairs=8, heldout_pairs=2, heldout_accuracy=0.5, runtime_s=1.0)
    text = render(irm_card(cfg, paths, irm, ref, str(paths.sft_model), [{"chosen": "Add 3 and 4."}]))
    meta = front_matter_of(text, tmp_path)
    assert meta.pipeline_tag == "text-classification" and "reward-model" in meta.tags
    assert "`../irm_pairs.jsonl`" in text and "instruction = \"Add 3 and 4.\"" in text
    paths.irm_model.mkdir(parents=True, exist_ok=True)
    (paths.irm_model / "README.md").write_text(text)
    assert absolute_paths_in(paths.irm_model, tmp_path) == []


def front_matter_of(text: str, tmp_path):
    folder = tmp_path / "card"
    folder.mkdir(exist_ok=True)
    (folder / "README.md").write_text(text)
    return front_matter(folder)


@pytest.mark.parametrize("params, world, terms, fmt", [
    ("tiny-code.toml", "tiny_code", "rI / rV", "a function in a ```python block"),
    ("tiny-cpu.toml", "arith", "rI / rA", "'Step 1: ... The answer is: X'")])
def test_the_ppo_card_speaks_the_runs_world_and_reward(tmp_path, params, world, terms, fmt):
    """A code run's card named "the WizardMath recipe" and answers ending "The answer is: X"; now the world, the
    formula's terms (and their means) and the world's answer format."""
    from types import SimpleNamespace

    from conftest import ROOT
    from rleif_kit.core.config import load_config
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.models.cards import render
    from rleif_kit.ppo.stage import build_card

    cfg = load_config(ROOT / "params" / params, [f'base.output_dir="{tmp_path}"'])
    log = [{"step": 0, "reward_mean": 0.5, "kl": 0.1, "rI_mean": 0.8, "rA_mean": 0.6, "rV_mean": 0.25}]
    text = render(build_card(cfg, RunPaths(tmp_path), SimpleNamespace(log=log, steps=1, runtime_s=3.0), None))
    assert f"in the {world} world" in text and f"answers as {fmt}" in text
    means = {"rI / rV": "0.800 / 0.250", "rI / rA": "0.800 / 0.600"}[terms]
    assert f"last step: mean {terms}" in text and means in text
    assert "WizardMath recipe" not in text
    if world == "tiny_code":
        assert "The answer is" not in text and "rA from" not in text and "rV from the world's verifier" in text


def test_the_prm_snippet_of_a_program_scores_what_the_kit_scores(tmp_path, small_model_dir):
    """The code world puts no space between prompt and program and ends steps at statements: the snippet joins the
    program's exact slices after the prompt and reads the same tokens as the kit's scorer."""
    from transformers import AutoModelForTokenClassification

    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.rewards.reward import head_labels, step_scores
    from rleif_kit.worlds import get_world

    code = get_world("tiny_code")
    tok = load_tokenizer(str(small_model_dir))
    torch.manual_seed(0)
    prm = AutoModelForTokenClassification.from_pretrained(small_model_dir, num_labels=2, **head_labels("token"))
    prm.config.pad_token_id = tok.pad_token_id
    question = "Write a Python function f(x) that returns x plus 1."
    solution = "```python\ndef f(x):\n    y = x + 1\n    return y\n```"
    _, steps, join = snippet_steps([{"question": question, "solution": solution}], code)
    usage = prm_usage(code.train_template(cot=True), question, steps, PRM_LABELS, join=join, lead="")
    write_card(_save(prm, tok, tmp_path / "prm"), ModelCard("PRM", "", {}, usage))
    expected = step_scores(prm.eval(), tok, [(question, solution)], world=code)[0]
    assert len(expected) == 2 and run_usage(tmp_path / "prm")["scores"] == pytest.approx(expected, abs=1e-5)


def _cards(params, tmp_path, examples, prm_rows):
    """The SFT, PRM and IRM cards of the preset ``params`` with hand-made results, rendered."""
    from conftest import ROOT
    from rleif_kit.core.config import load_config
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.sft.card import build_card

    cfg = load_config(ROOT / "params" / params, [f'base.output_dir="{tmp_path}"'])
    paths = RunPaths(tmp_path)
    sft = SimpleNamespace(log=[{"loss": 1.0, "step": 1}], accuracy_before=0.125, accuracy_after=0.5, examples=2,
                          steps=2, runtime_s=5.0, first_loss=1.0, final_loss=0.5)
    prm = SimpleNamespace(log=[], heldout_scores=[], heldout_labels=[], train_examples=3, heldout_examples=1,
                          train_steps=6, heldout_steps=2, correct_share=0.5, step_accuracy=1.0, step_auc=1.0,
                          runtime_s=2.0, calibration=[2.5, 7.0])
    irm = SimpleNamespace(log=[], train_pairs=8, heldout_pairs=2, heldout_accuracy=0.5, runtime_s=1.0)
    return cfg, paths, {"sft": lambda: render(build_card(cfg, paths, sft, "../../tiny-llama", "", examples)),
                        "prm": lambda: render(prm_card(cfg, paths, prm, "../../03_sft/model", "", prm_rows)),
                        "irm": lambda: render(irm_card(cfg, paths, irm, "../../03_sft/model", "",
                                                       [{"chosen": examples[0]["instruction"]}]))}


def test_a_code_runs_cards_speak_its_world_not_arithmetic(tmp_path):
    """The tiny code run's SFT card said "step-by-step solutions (`Step 1: ... The answer is: X`)", "the WizardMath
    recipe" and plotted "Held-out arithmetic accuracy"; its PRM card showed "Tom has 3 pens" and said rA is in the
    reward `rI * rV`. Now: the world's prompt and answer format, pass@1, and a held-out task the model passed."""
    from rleif_kit.worlds import world_for
    from rleif_kit.worlds.data import heldout_problems

    program = "```python\ndef f(x):\n    y = x + 1\n    return y\n```"
    examples = [{"instruction": "Write a Python function f(x) that returns x plus 1.", "source": "seed"}]
    cfg, paths, cards = _cards("tiny-code.toml", tmp_path, examples,
                               [{"question": examples[0]["instruction"], "solution": program, "labels": [True, False]}])
    held = heldout_problems(cfg, paths)[:3]
    write_jsonl(paths.sft_heldout("after"), [{"id": p["id"], "correct": i == 1} for i, p in enumerate(held)])
    fmt = world_for(cfg).format_name
    texts = {name: make() for name, make in cards.items()}
    for name, text in texts.items():
        assert "arithmetic" not in text.lower() and "The answer is" not in text, name
        assert "wizardmath" not in text.lower(), name
        assert "Tom has 3 pens" not in text and "tiny_code world" in text, name
        assert "wizardcoder" in front_matter_of(text, tmp_path).tags, name
    sft, prm = texts["sft"], texts["prm"]
    assert f"answered in its format ({fmt})" in sft and "the WizardCoder recipe" in sft
    assert f'instruction = "{held[1]["question"]}"' in sft  # the held-out task the trained model passed
    assert "| held-out pass@1 before / after | 0.125 / 0.500 |" in sft and "chain-of-thought" not in sft
    assert "then one space" not in sft and "rV from the task's tests" in sft
    assert f"({fmt}), exactly as the policy writes it" in prm and "A step is one top-level statement" in prm
    assert "this run's reward `rI * rV` does not read it (the formula has no rA)" in prm
    assert 'JOIN, LEAD = "", ""' in prm and "def f(x)" in prm
    assert "the tiny-code judge" in texts["irm"]


def test_a_math_runs_cards_keep_the_arithmetic_worlds_words(tmp_path):
    examples = [{"instruction": "Raj has 9 plums. He eats 2. How many are left?", "source": "seed"}]
    rows = [{"question": "Maya has 4 plants.", "solution": SOLUTION, "labels": [True, False]}]
    cfg, paths, cards = _cards("tiny-cpu.toml", tmp_path, examples, rows)
    texts = {name: make() for name, make in cards.items()}
    for name, text in texts.items():
        assert "arith world" in text and "wizardmath" in front_matter_of(text, tmp_path).tags, name
    sft, prm = texts["sft"], texts["prm"]
    assert "answered in its format ('Step 1: ... The answer is: X')" in sft and "the WizardMath recipe" in sft
    assert "with the chain-of-thought opener" in sft and "then one space and the response" in sft
    assert "| held-out accuracy before / after | 0.125 / 0.500 |" in sft
    assert f'instruction = "{examples[0]["instruction"]}"' in sft  # no held-out rows yet: the first example
    assert "rA in this run's RLEIF reward `rI * rA` is the `min`" in prm and "`The answer is: X` line" in prm
    assert '"Step 1: 4 * 2 = 8.", "Step 2: 8 / 2 = 4. The answer is: 4"' in prm and 'JOIN, LEAD = " ", " "' in prm
    assert "the arithmetic judge" in texts["irm"]
