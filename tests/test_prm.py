"""PRM: step ends in the real tokenizer, the collator, AUC on hand values, and training on the tiny model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from card_checks import absolute_paths_in, front_matter, run_usage
from conftest import ROOT, TINY_PARAMS, tiny_overrides
from rleif_kit.core.metrics import roc_auc, threshold_accuracy
from rleif_kit.rewards.reward import IGNORE, StepLabelCollator, encode, prm_input, solution_step_ends
from rleif_kit.rewards.prm import load_prm800k_style, verifier_examples
from rleif_kit.worlds import get_world

SOLUTION = "Step 1: 4 * 2 = 8. Step 2: 8 / 2 = 4. The answer is: 4"


def half_slipped_examples(n: int = 120) -> list[dict]:
    """``n`` arithmetic solutions of 2-3 steps, every second one with its first step's result + 1 (every step from
    there wrong), labelled by the step verifier: the PRM training tests' data."""
    from rleif_kit.worlds.arith.judge import verifier_labels
    from rleif_kit.worlds.arith.problems import generate_problems

    examples = []
    for i, p in enumerate(generate_problems(n, seed=3, min_steps=2, max_steps=3)):
        solution = p["solution"]
        if i % 2:
            first = solution.split(". ")[0]
            solution = solution.replace(first, first[:-1] + str((int(first.split("= ")[1]) + 1)), 1)
        examples.append({"id": p["id"], "question": p["question"], "solution": solution,
                         "labels": verifier_labels(p["question"], solution, p["answer"])})
    return examples


def test_auc_on_hand_values():
    # positives 0.9, 0.4; negatives 0.5, 0.1: pairs (0.9>0.5, 0.9>0.1, 0.4<0.5, 0.4>0.1) -> 3/4
    assert roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.5, 0.1]) == 0.75
    assert roc_auc([1, 0], [0.3, 0.3]) == 0.5  # a tie counts half
    assert roc_auc([1, 1], [0.2, 0.9]) is None  # one class only: undefined, not 0.5
    assert threshold_accuracy([1, 0, 1], [0.9, 0.6, 0.2]) == pytest.approx(1 / 3)


def test_step_ends_markers_then_lines():
    ends = solution_step_ends(SOLUTION)
    assert [SOLUTION[:e] for e in ends] == ["Step 1: 4 * 2 = 8.", SOLUTION]  # the last step ends after its answer
    lines = "First 3 + 4 = 7.\nThen 7 * 2 = 14.\nThe answer is: 14"
    assert [lines[:e].split("\n")[-1] for e in solution_step_ends(lines)] == ["First 3 + 4 = 7.", "The answer is: 14"]
    assert solution_step_ends(lines)[-1] == len(lines)
    assert solution_step_ends("The answer is 14 because I said so.") == []  # flagged, not one step
    assert solution_step_ends("The answer is: 7\n3 + 4 = 7") == []  # an answer before any step is no step


def test_encode_puts_labels_on_the_last_token_of_each_step(small_model_dir):
    from rleif_kit.models.loading import load_tokenizer

    tok = load_tokenizer(str(small_model_dir))
    question = "Maya has 4 plants."
    row = encode(tok, question, SOLUTION, [True, False], max_len=1024)
    text, placed, offset = prm_input(question, SOLUTION)
    assert text.endswith(" " + SOLUTION) and placed == SOLUTION and text[offset:] == SOLUTION
    offsets = tok(text, return_offsets_mapping=True)["offset_mapping"]
    for pos, step_end in zip(row["positions"], solution_step_ends(SOLUTION)):
        start, stop = offsets[pos]
        assert start < offset + step_end <= stop  # the token covers the step's last character
    assert [text[offset + e - 1] for e in solution_step_ends(SOLUTION)] == [".", "4"]  # step 1's '.', the answer's 4
    labelled = {i: v for i, v in enumerate(row["labels"]) if v != IGNORE}
    assert labelled == {row["positions"][0]: 1, row["positions"][1]: 0}
    cut = encode(tok, question, SOLUTION, [True, False], max_len=row["positions"][1])  # second step truncated
    assert cut["positions"][1] is None and sorted(set(cut["labels"])) == [IGNORE, 1]
    with pytest.raises(ValueError, match="2 steps"):
        encode(tok, question, SOLUTION, [True])
    batch = StepLabelCollator(tok.pad_token_id)([row, cut])
    assert batch["input_ids"].shape == batch["labels"].shape == batch["attention_mask"].shape
    assert batch["attention_mask"][1].sum() == len(cut["input_ids"]) and batch["labels"][1, -1] == IGNORE


def test_prm800k_style_file(tmp_path):
    path = tmp_path / "prm.jsonl"
    path.write_text(json.dumps({"question": "q", "steps": ["2 + 2 = 4.", "4 * 3 = 13."], "labels": [1, -1]}) + "\n"
                    + json.dumps({"question": "q2", "steps": ["a", "b"], "labels": [True, 0]}) + "\n")
    rows = load_prm800k_style(path)
    assert rows[0]["solution"] == "Step 1: 2 + 2 = 4. Step 2: 4 * 3 = 13." and rows[0]["labels"] == [True, False]
    assert rows[1]["labels"] == [True, False]  # PRM800K's neutral 0 is not a correct step
    path.write_text(json.dumps({"question": "q", "steps": ["a"], "labels": [1, 1]}) + "\n")
    with pytest.raises(ValueError, match="1 steps but 2 labels"):
        load_prm800k_style(path)


def test_verifier_examples_label_and_flag():
    problem = {"topic": "garden", "name": "Maya", "item": "plants", "start": 4, "intro": 1, "question_form": 0,
               "ops": [{"kind": "mul", "value": 2, "template": 1}, {"kind": "div", "value": 2, "template": 3}]}
    from rleif_kit.worlds.arith.problems import Problem

    q = Problem.from_record(problem).question()
    samples = [{"id": "a", "question": q, "solution": SOLUTION, "problem": problem},
               {"id": "b", "question": q, "solution": "Step 1: 4 * 2 = 9. Step 2: 9 / 2 = 4. The answer is: 4",
                "problem": problem},
               {"id": "c", "question": q, "solution": "It is 4.", "problem": problem}]
    examples, flagged = verifier_examples(samples, get_world("arith"))
    assert [e["labels"] for e in examples] == [[True, True], [False, False]] and flagged == 1


@pytest.mark.slow
@pytest.mark.parametrize("finetune", ["full", "lora"])
def test_prm_trains_every_parameter_and_scores(tmp_path, small_model_dir, finetune):
    import torch

    from rleif_kit.models.loading import trainable_parameters
    from rleif_kit.rewards.prm import train_prm
    from rleif_kit.rewards.reward import answer_scores
    from rleif_kit.rewards.reward import prm_score
    from rleif_kit.rewards.rm_training import load_rm_for_training
    from rleif_kit.rewards.reward import load_rm
    from rleif_kit.core.run_setup import setup
    from datasets import load_dataset

    base = shutil.copytree(small_model_dir, tmp_path / "run" / "base")  # inside the run: it moves with it below
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", f'reward_model.prm_base="{base}"',
                                                         "reward_model.rm_epochs=4", "reward_model.rm_batch_size=16",
                                                         f'reward_model.rm_finetune="{finetune}"',
                                                         'reward_model.prm_head="token"',
                                                         "sft.lora_targets=[\"q_proj\",\"v_proj\"]"),
                       stage="04_reward_models", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    examples = half_slipped_examples()
    initial = trainable_parameters(load_rm_for_training(str(small_model_dir), "token", cfg, False)[0])
    model, tok, result = train_prm(cfg, paths, examples)
    now = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert set(initial) == set(now)  # same seeded init: the head and LoRA A start identical in both loads
    unchanged = [n for n, p in initial.items() if torch.equal(p, now[n].detach())]
    assert len(now) >= 2 and unchanged == [], unchanged
    losses = [r["loss"] for r in result.log]
    assert sum(losses[-3:]) < sum(losses[:3]), losses  # batch losses are noisy: compare the ends, 3 points each
    assert result.heldout_steps > 0 and result.step_auc is not None
    reloaded, tok2 = load_rm(result.model_dir)
    q, s = examples[0]["question"], examples[0]["solution"]
    assert prm_score(reloaded, tok2, q, s) == pytest.approx(prm_score(model, tok, q, s), abs=1e-5)
    assert answer_scores(reloaded, tok2, [(q, s), (q, "no steps here")]) [1] is None
    assert "\n# Process reward model" in (result.model_dir / "README.md").read_text()

    # labels named; the card's snippet scores as the kit does; the steps lie beside the model as a dataset
    assert reloaded.config.id2label == {0: "wrong", 1: "right"} and reloaded.config.label2id["right"] == 1
    meta = front_matter(result.model_dir)
    assert meta.pipeline_tag == "token-classification" and "process-reward-model" in meta.tags
    assert meta.library_name == ("transformers" if finetune == "full" else "peft")
    card = run_usage(result.model_dir)
    solution = " ".join(card["steps"])
    assert card["scores"] == pytest.approx(prm_score(reloaded, tok2, card["question"], solution), abs=1e-5)
    rows = load_dataset("json", data_files=str(paths.rm_rows("prm")), cache_dir=str(tmp_path / "hf"))["train"]
    assert len(rows) == result.train_examples + result.heldout_examples and rows["split"].count("heldout") == \
        result.heldout_examples
    assert all(len(r["completions"]) == len(r["labels"]) for r in rows) and rows[0]["source"] is None  # no source given

    # no absolute path written; moved elsewhere, the folder still loads (base + adapter for LoRA) and scores
    info = json.loads((result.model_dir / "rm_info.json").read_text())
    assert info["base_model"] == "../../base" and absolute_paths_in(result.model_dir, tmp_path) == []
    moved = Path(shutil.move(paths.output_dir, tmp_path / "elsewhere"))
    again, tok3 = load_rm(moved / "04_reward_models" / "prm")
    assert prm_score(again, tok3, q, s) == pytest.approx(prm_score(model, tok, q, s), abs=1e-5)
    assert run_usage(moved / "04_reward_models" / "prm")["scores"] == pytest.approx(card["scores"], abs=1e-6)


def test_paired_bootstrap_and_ab_verdicts():
    from rleif_kit.checks.verdicts import check_ab
    from rleif_kit.core.metrics import paired_bootstrap
    from rleif_kit.core.config import DiagnosticsConfig

    sft = [True] * 50 + [False] * 50
    gain, low, high = paired_bootstrap(sft, sft)
    assert (gain, low, high) == (0.0, 0.0, 0.0)  # identical results: no gain and no spread
    better = [True] * 90 + [False] * 10  # 40 items flipped to right: +40 points, clearly
    assert check_ab(sft, better, DiagnosticsConfig()).status == "ok"
    worse = [True] * 40 + [False] * 60
    v = check_ab(sft, worse, DiagnosticsConfig())
    assert v.status == "fail" and v.numbers["gain"] == pytest.approx(-0.1)  # a drop is never ok
    noisy = [True] * 52 + [False] * 48  # +2 over 100 items: cannot tell
    assert check_ab(sft, noisy, DiagnosticsConfig()).status == "warn"


def test_extra_layers_start_as_the_identity_then_train_and_reload(small_model_dir, tmp_path):
    """prm_extra_layers (LLaMA Pro's block expansion): the expanded model computes exactly what its base does, the
    new layers' zeroed projections receive gradient, and the saved model loads with its new depth."""
    import torch
    from transformers import AutoModelForTokenClassification

    from rleif_kit.rewards.rm_training import expand_layers

    model = AutoModelForTokenClassification.from_pretrained(str(small_model_dir), num_labels=2).eval()
    ids = torch.tensor([[1, 5, 6, 7, 8, 9, 10]])
    before = model(ids).logits
    expand_layers(model, 2)
    assert model.config.num_hidden_layers == len(model.model.layers) == 4  # 2 + 2
    assert torch.equal(model(ids).logits, before)  # zero output projections: the residual stream passes unchanged
    model.train()
    model(ids, labels=torch.tensor([[0, 1, 0, 1, 0, 1, 0]])).loss.backward()
    for layer in model.model.layers[2:]:  # what starts at zero gets a gradient, so the new layers learn
        assert layer.self_attn.o_proj.weight.grad.abs().sum() > 0 and layer.mlp.down_proj.weight.grad.abs().sum() > 0
    model.save_pretrained(tmp_path / "prm")
    again = AutoModelForTokenClassification.from_pretrained(tmp_path / "prm").eval()
    assert again.config.num_hidden_layers == 4 and torch.allclose(again(ids).logits, model.eval()(ids).logits)


def test_extra_layers_need_full_finetuning():
    from rleif_kit.core.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"prm_extra_layers = 1: new layers train whole.*'lora'"):
        load_config(TINY_PARAMS, ["reward_model.prm_extra_layers=1", 'reward_model.rm_finetune="lora"'], workdir=ROOT)


def test_conclusion_spans_cover_each_steps_result_and_the_answer_line():
    from rleif_kit.rewards.reward import conclusion_spans

    text, placed, offset = prm_input("Maya has 4 plants.", SOLUTION)
    spans = conclusion_spans(text, offset, solution_step_ends(placed))
    # what each step claims, not its operands (3 + 5 or 5 + 3 is no mistake); the last step runs through its answer
    assert [text[a:b] for a, b in spans] == [" 8.", " 4. The answer is: 4"]
    assert conclusion_spans("Step 1: no equals sign", 0, [22]) == [(0, 22)]  # no '=': the whole step
    # a step that claims no value is read whole: an empty span would score it as sure as can be (a reward hack)
    hole = "Step 1: 3 + 5 = Step 2: 8 - 2 = 6. The answer is: 6"
    assert [hole[a:b] for a, b in conclusion_spans(hole, 0, solution_step_ends(hole))] == [
        "Step 1: 3 + 5 =", " 6. The answer is: 6"]


def test_calibration_is_a_logistic_fit_and_one_class_leaves_the_raw_sigmoid():
    from rleif_kit.rewards.reward import calibrated
    from rleif_kit.rewards.prm_likelihood import fit_calibration

    # right steps near log p = 0, wrong ones far below: the fit rises with x and puts 0.5 between the classes
    a, b = fit_calibration([-0.1, -0.2, -0.05, -3.0, -4.0, -2.5, -0.3, -3.5], [1, 1, 1, 0, 0, 0, 1, 0])
    assert a > 0 and -3.0 < -b / a < -0.3
    assert calibrated(-0.1, [a, b]) > 0.9 and calibrated(-4.0, [a, b]) < 0.1
    assert fit_calibration([-1.0, -2.0], [True, True]) == [1.0, 0.0]
    assert calibrated(0.0, [1.0, 0.0]) == 0.5 and calibrated(-800.0, [1.0, 0.0]) == 0.0  # no overflow far out


def test_likelihood_rows_are_the_right_solutions_with_the_loss_on_the_solution(small_model_dir):
    from rleif_kit.models.loading import load_tokenizer
    from rleif_kit.rewards.prm_likelihood import IGNORE, likelihood_rows

    tok = load_tokenizer(str(small_model_dir))
    world = get_world("arith")
    right = {"question": "Maya has 4 plants.", "solution": SOLUTION, "labels": [True, True]}
    wrong = {**right, "labels": [True, False]}
    rows = likelihood_rows(tok, [right, wrong], 1024, world)
    assert len(rows) == 1  # a language model of right solutions: the wrong one is left out
    ids, labels = rows[0]["input_ids"], rows[0]["labels"]
    assert ids[-1] == tok.eos_token_id and labels[-1] == tok.eos_token_id  # it learns where a solution stops
    first = next(i for i, v in enumerate(labels) if v != IGNORE)
    assert tok.decode(ids[first:-1]).strip() == SOLUTION and set(labels[:first]) == {IGNORE}
    assert likelihood_rows(tok, [right], first + 2, world) == []  # longer than max_len: left out
    swapped = likelihood_rows(tok, [right], 1024, world, same_edits=True)
    assert len(swapped) == 2  # and "4 * 2" written "2 * 4", with same_edits


def test_the_likelihood_prm_trains_every_parameter_calibrates_and_reloads(tmp_path, small_model_dir):
    import torch

    from rleif_kit.core.run_setup import setup
    from rleif_kit.models.loading import trainable_parameters
    from rleif_kit.rewards.reward import load_rm
    from rleif_kit.rewards.reward import answer_scores, step_scores
    from rleif_kit.rewards.prm import train_prm
    from rleif_kit.rewards.rm_training import load_rm_for_training

    base = shutil.copytree(small_model_dir, tmp_path / "run" / "base")
    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", f'reward_model.prm_base="{base}"',
                                                         'reward_model.prm_head="likelihood"',
                                                         "reward_model.rm_epochs=4", "reward_model.rm_batch_size=16"),
                       stage="04_reward_models", report_dir=str(tmp_path / "r"), workdir=str(ROOT))
    examples = half_slipped_examples()
    initial = trainable_parameters(load_rm_for_training(str(small_model_dir), "likelihood", cfg, False)[0])
    model, tok, result = train_prm(cfg, paths, examples)
    now = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert set(initial) == set(now) and [n for n, p in initial.items() if torch.equal(p, now[n].detach())] == []
    losses = [r["loss"] for r in result.log]
    assert sum(losses[-3:]) < sum(losses[:3]), losses
    info = json.loads((result.model_dir / "rm_info.json").read_text())
    assert info["head"] == "likelihood" and len(info["calibration"]) == 2
    assert result.heldout_steps > 0 and result.step_auc is not None
    reloaded, tok2 = load_rm(result.model_dir)
    items = [(e["question"], e["solution"]) for e in examples[:4]] + [("q", "no steps here")]
    scores, before = step_scores(reloaded, tok2, items), step_scores(model, tok, items)
    assert all(s == pytest.approx(b, abs=1e-5) for s, b in zip(scores[:4], before[:4]))  # the folder scores alone
    assert scores[-1] is None and all(0.0 <= x <= 1.0 for s in scores[:4] for x in s)
    assert [len(s) for s in scores[:4]] == [len(e["labels"]) for e in examples[:4]]
    assert answer_scores(reloaded, tok2, items[:1])[0] == pytest.approx(min(scores[0]))
    card = run_usage(result.model_dir)  # the card's snippet, with transformers alone, scores as the kit does
    assert card["scores"] == pytest.approx(step_scores(reloaded, tok2, [(card["question"], " ".join(card["steps"]))])[0],
                                           abs=1e-5)
    assert front_matter(result.model_dir).pipeline_tag == "text-generation"
    # a step that leaves out its result scores as its whole text does, never as a sure one; the card's snippet agrees
    from rleif_kit.models.cards import ModelCard, prm_likelihood_usage, write_card
    from rleif_kit.rewards.reward import calibrated
    from rleif_kit.worlds.prompts import MATH_PROMPT_COT

    hole = ["Step 1: 3 + 5 =", "Step 2: 8 - 2 = 6. The answer is: 6"]
    kit = step_scores(reloaded, tok2, [("Ann has 3 pens.", " ".join(hole))])[0]
    assert kit[0] < calibrated(0.0, info["calibration"]), kit
    write_card(result.model_dir, ModelCard("PRM", "", {}, prm_likelihood_usage(
        MATH_PROMPT_COT, "Ann has 3 pens.", hole, info["calibration"])))
    assert run_usage(result.model_dir)["scores"] == pytest.approx(kit, abs=1e-5)
