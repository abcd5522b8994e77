"""The reward models' datasets in TRL's formats: ``irm_pairs.jsonl`` goes from ``datasets.load_dataset("json")``
straight into TRL's RewardTrainer (which tokenises the texts in ``chosen`` / ``rejected`` and trains a step on them);
``prm_steps.jsonl`` has TRL's stepwise-supervision columns (``prompt``, ``completions``, ``labels``) with the types
TRL's docs give them (TRL 1.16 ships no PRM trainer or PRM data helper to hand them to).

On the small test model, under pytest's tmp dirs; no network.
"""

from __future__ import annotations

from rleif_kit.core.jsonl import write_jsonl
from rleif_kit.rewards.irm_data import pairs_from_scores
from rleif_kit.rewards.rm_datasets import pair_rows, step_rows

SIBLINGS = [{"id": "g-1", "text": "Add 3 and 4, then double it.", "operator": "deepen", "sibling_group": "g"},
            {"id": "g-2", "text": "Add 3 and.", "operator": "simplify", "sibling_group": "g"},
            {"id": "h-1", "text": "Tom has 2 pens and buys 5 more.", "operator": "concretize", "sibling_group": "h"},
            {"id": "h-2", "text": "Tom has pens.", "operator": "deepen", "sibling_group": "h"}]


def test_irm_pairs_load_straight_into_trls_reward_trainer(tmp_path, small_model_dir):
    from datasets import load_dataset
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl import RewardConfig, RewardTrainer

    pairs = pairs_from_scores(SIBLINGS[:2], [2, 1]) + pairs_from_scores(SIBLINGS[2:], [2, 1])
    write_jsonl(tmp_path / "irm_pairs.jsonl", pair_rows(pairs[:1], pairs[1:]))
    data = load_dataset("json", data_files=str(tmp_path / "irm_pairs.jsonl"), cache_dir=str(tmp_path / "c"))["train"]
    assert data["chosen"] == [SIBLINGS[0]["text"], SIBLINGS[2]["text"]]  # the texts, under TRL's names
    assert data["chosen_id"] == ["g-1", "h-1"] and data["rejected_id"] == ["g-2", "h-2"]

    tokenizer = AutoTokenizer.from_pretrained(small_model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(small_model_dir, num_labels=1)
    model.config.pad_token_id = tokenizer.pad_token_id
    args = RewardConfig(output_dir=str(tmp_path / "out"), max_steps=1, per_device_train_batch_size=2,
                        report_to=[], save_strategy="no", use_cpu=True, max_length=64)
    trainer = RewardTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)
    # TRL's own preparation tokenised the instruction texts (and appended EOS), not the variant ids
    first = trainer.train_dataset[0]
    assert first["chosen_ids"] == tokenizer(SIBLINGS[0]["text"] + tokenizer.eos_token)["input_ids"]
    assert first["rejected_ids"] == tokenizer(SIBLINGS[1]["text"] + tokenizer.eos_token)["input_ids"]
    assert trainer.train().global_step == 1  # and its Bradley-Terry loss trains on them as they are


def test_prm_steps_have_trls_stepwise_supervision_columns(tmp_path):
    from datasets import Value, load_dataset
    from trl.data_utils import is_conversational

    solution = "Step 1: 4 * 2 = 8. Step 2: 8 / 2 = 4. The answer is: 4"
    examples = [{"id": "q1-s0", "instruction_id": "q1", "question": "Maya has 4 plants.", "solution": solution,
                 "labels": [True, False], "source": "verifier"}]
    held = [{"id": "q2-s1", "instruction_id": "q2", "question": "Bo has 2.", "solution": "Step 1: 2 = 2. The answer "
             "is: 2", "labels": [1], "source": "judged"}]
    write_jsonl(tmp_path / "prm_steps.jsonl", step_rows(examples, held))
    data = load_dataset("json", data_files=str(tmp_path / "prm_steps.jsonl"), cache_dir=str(tmp_path / "c"))["train"]
    # TRL's stepwise supervision: {"prompt": str, "completions": [str, ...], "labels": [bool, ...]}, one label a step
    assert data.features["prompt"] == Value("string")
    assert data.features["completions"].feature == Value("string")
    assert data.features["labels"].feature == Value("bool")
    assert data["prompt"] == ["Maya has 4 plants.", "Bo has 2."]
    assert data[0]["completions"] == ["Step 1: 4 * 2 = 8.", "Step 2: 8 / 2 = 4. The answer is: 4"]
    assert data["labels"] == [[True, False], [True]]
    assert not any(is_conversational(row) for row in data)  # TRL's standard (plain-text) format


def test_a_launched_rank_reads_the_saved_prm_dataset_back_as_the_kits_examples():
    from rleif_kit.rewards.rm_datasets import training_examples

    saved = step_rows([{"id": "q1-s0", "question": "Bo has 2.", "solution": "Step 1: 2 = 2. The answer is: 2",
                        "labels": [True]}], [])
    assert training_examples("prm", saved)[0]["question"] == "Bo has 2."  # from TRL's prompt
    raw = [{"question": "Bo has 2.", "solution": "Step 1: 2 = 2. The answer is: 2", "labels": [True],
            "train_only": True}]
    assert training_examples("prm", raw) == raw  # what a launch wrote to train on stays as it is
    pairs = pairs_from_scores(SIBLINGS[:2], [2, 1])
    assert training_examples("irm", pairs) == pairs  # a pair has one shape in memory and on disk
