"""``rleif rm-check``: the gate's checks for any reward model (diagnostics/rm_check.py, pipeline/rm_check_page.py).

Pure logic with hand-worked values (the preference accuracy, the model's kind, the data's shape and its one-line
errors), a plain transformers reward model without rm_info.json (built here from the session's small tiny Llama), a
LoRA adapter of one, and a broken reward from the gallery of tests/test_pipeline.py (a scorer that rewards length,
wrapped as a model) caught with exit status 1. That rm-check on the tiny run's IRM and PRM reproduces the gate's
verdicts is in tests/test_pipeline.py (it needs the shared run).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from rleif_kit.core.config import DiagnosticsConfig
from rleif_kit.core.user_files import UserFileError
from rleif_kit.diagnostics import rm_check as rc
from rleif_kit.pipeline.cli import main

STEP_DATA = Path(__file__).parent / "data" / "prm_formats"


def _jsonl(path: Path, rows: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


# ------------------------------------------------------------------ pure logic

def test_preference_accuracy_counts_a_tie_half_and_holds_to_the_truth_thresholds():
    d = DiagnosticsConfig()  # ok from 0.7, fail below 0.55
    v = rc.check_preference([0.9, 0.5, 0.2, 0.8], [0.1, 0.5, 0.3, 0.4], d)
    assert v.numbers["pairs"] == 4 and v.numbers["accuracy"] == pytest.approx((1 + 0.5 + 0 + 1) / 4)  # 0.625
    assert v.numbers["mean_margin"] == pytest.approx((0.8 + 0 - 0.1 + 0.4) / 4)
    assert v.status == "warn" and "62%" in v.advice
    assert rc.check_preference([0.9, 0.8], [0.1, 0.2], d).status == "ok"
    assert rc.check_preference([0.1, 0.2], [0.9, 0.8], d).status == "fail"
    assert rc.check_preference([None], [0.3], d).status == "fail"  # nothing scored


def test_the_model_kind_comes_from_the_head_and_the_data():
    assert rc.model_kind("token", "auto", "judged") == rc.model_kind("likelihood", "prm", "steps") == "PRM"
    assert rc.model_kind("sequence", "auto", "texts") == "IRM"
    assert rc.model_kind("sequence", "auto", "judged") == rc.model_kind("sequence", "auto", "preference") == "RM"
    assert rc.model_kind("sequence", "irm", "preference") == "IRM"
    for head, kind, shape in (("token", "irm", "judged"), ("sequence", "prm", "judged"), ("token", "auto", "texts")):
        with pytest.raises(ValueError):
            rc.model_kind(head, kind, shape)


def test_joined_and_the_instruction_edit_that_needs_no_world():
    assert rc.joined("Q?", "A") == "Q?\nA" and rc.joined("Q?\n", "A") == "Q?\nA" and rc.joined("", "A") == "A"
    pairs = rc.instruction_pairs(["Tom has 3 pens and buys 2.", "No number here."])
    assert pairs == {"number_removed": [("Tom has 3 pens and buys 2.", "Tom has pens and buys 2.")]}
    assert rc.instruction_pairs(["none"]) == {}


def test_each_data_shape_is_told_by_its_first_row(tmp_path):
    texts = rc.read_check_data(_jsonl(tmp_path / "t.jsonl", [{"text": "a 1"}, {"instruction": "b 2"}]))
    assert texts.shape == "texts" and [r["text"] for r in texts.rows] == ["a 1", "b 2"]
    judged = rc.read_check_data(_jsonl(tmp_path / "j.jsonl", [{"question": "q", "solution": "s", "correct": False}]))
    assert judged.shape == "judged" and judged.rows == [{"question": "q", "solution": "s", "correct": False}]
    pref = rc.read_check_data(_jsonl(tmp_path / "p.jsonl", [{"chosen": "x", "rejected": "y"}]))
    assert pref.shape == "preference" and pref.rows == [{"prompt": "", "chosen": "x", "rejected": "y"}]
    steps = rc.read_check_data(STEP_DATA / "prm_data.jsonl")
    assert steps.shape == "steps" and all(set(r) >= {"question", "solution", "correct", "labels"} for r in steps.rows)
    # a solution is right when no step is labelled wrong
    assert [r["correct"] for r in steps.rows] == [not any(v is False for v in r["labels"]) for r in steps.rows]
    assert {True, False} <= {r["correct"] for r in steps.rows}


@pytest.mark.parametrize("rows, line, field", [
    ([{"question": "q", "solution": "s", "correct": True}, {"question": "q", "solution": "s", "correct": "yes"}],
     2, "field 'correct': expected true or false"),
    ([{"question": "q", "solution": "s", "correct": True}, {"question": 3, "solution": "s", "correct": True}],
     2, "field 'question': expected a string"),
    ([{"chosen": "x", "rejected": "y"}, {"text": "t"}], 2, "are not those of the first row (preference)"),
    ([{"chosen": "x", "rejected": "y"}, {"prompt": 1, "chosen": "x", "rejected": "y"}], 2, "field 'prompt'"),
    ([{"answer": 3}], 1, "no rm-check data shape has these fields (answer)"),
    (["{not json"], 1, ""),
])
def test_malformed_data_is_one_line_naming_file_line_and_field(tmp_path, capsys, rows, line, field):
    path = _jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(UserFileError, match=f"^{re.escape(str(path))}:{line}: .*{re.escape(field)}"):
        rc.read_check_data(path)
    model = tmp_path / "seq"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"architectures": ["LlamaForSequenceClassification"],
                                                   "num_labels": 1}))
    assert main(["rm-check", "--model", str(model), "--data", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"rleif rm-check: error: {path}:{line}: ") and err.count("\n") == 1 and field in err


def test_a_folder_that_is_no_reward_model_is_one_line_naming_it(tmp_path, capsys):
    cases = {"lm": ({"architectures": ["LlamaForCausalLM"]}, "LlamaForCausalLM; rm-check reads"),
             "three": ({"architectures": ["LlamaForSequenceClassification"], "id2label": {"0": "a", "1": "b",
                                                                                        "2": "c"}}, "3 label(s)")}
    for name, (config, words) in cases.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        where = re.escape(str(tmp_path / name))
        with pytest.raises(UserFileError, match=f"^--model {where}: config.json says .*{re.escape(words)}"):
            rc.model_head(tmp_path / name)
    (tmp_path / "adapter").mkdir()
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps({"task_type": "CAUSAL_LM"}))
    with pytest.raises(UserFileError, match="task type 'CAUSAL_LM'"):
        rc.model_head(tmp_path / "adapter")
    assert main(["rm-check", "--model", str(tmp_path / "nowhere"), "--dry-run"]) == 2
    assert capsys.readouterr().err == f"rleif rm-check: error: --model {tmp_path / 'nowhere'}: not a model folder\n"


# ------------------------------------------------------------------ real models: another tool's folders

def _saved(model, tokenizer, out: Path) -> Path:
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def plain_rms(small_model_dir, tmp_path_factory):
    """A TRL-style reward model (a sequence classifier, one label) and a token-classification PRM (two labels),
    saved as transformers saves them: no rm_info.json."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoModelForTokenClassification

    from rleif_kit.models.loading import load_tokenizer

    root = tmp_path_factory.mktemp("plain_rms")
    tok = load_tokenizer(str(small_model_dir))
    torch.manual_seed(0)
    seq = AutoModelForSequenceClassification.from_pretrained(str(small_model_dir), num_labels=1)
    seq.config.pad_token_id = tok.pad_token_id
    token = AutoModelForTokenClassification.from_pretrained(str(small_model_dir), num_labels=2)
    return {"seq": _saved(seq, tok, root / "seq"), "token": _saved(token, tok, root / "token"), "root": root}


def _arith_rows(n: int = 24) -> list[dict]:
    from rleif_kit.worlds.arith import problems as arith

    rows = []
    for i, p in enumerate(arith.generate_problems(n, seed=3)):
        wrong = i % 2 == 1
        sol = p["solution"].rsplit("The answer is:", 1)[0] + "The answer is: 999" if wrong else p["solution"]
        rows.append({"question": p["question"], "solution": sol, "correct": not wrong})
    return rows


def test_a_plain_sequence_classifier_without_rm_info_is_checked_as_an_irm_and_an_rm(plain_rms, tmp_path, capsys):
    assert rc.model_head(plain_rms["seq"]) == ("sequence", "config.json")
    assert rc.model_head(plain_rms["token"]) == ("token", "config.json")
    texts = _jsonl(tmp_path / "texts.jsonl", [{"text": f"Tom has {i} pens and buys {i + 2} more. How many?"}
                                              for i in range(3, 15)])
    out = tmp_path / "irm"
    code = main(["rm-check", "--model", str(plain_rms["seq"]), "--data", str(texts), "--out", str(out)])
    result = json.loads((out / "rm_check.json").read_text())
    assert result["kind"] == "IRM" and result["head"] == "sequence"
    assert [v["check"] for v in result["verdicts"]] == ["irm_distribution", "irm_probe_number_removed"]
    assert result["verdicts"][0]["numbers"]["n"] == 12 and result["verdicts"][1]["numbers"]["pairs"] == 12
    assert code == (1 if result["failed"] else 0)
    page = (out / "rm_check.html").read_text()
    assert "irm_probe_number_removed" in page and 'src="figures/rm_check_probes.png"' in page
    assert (out / "figures" / "rm_check_scores.png").exists()

    judged = _jsonl(tmp_path / "judged.jsonl", _arith_rows())
    loaded = rc.load_reward_model(plain_rms["seq"])
    rm = rc.rm_check(loaded, judged)
    assert rm.kind == "RM" and rm.metrics["rows"] == 24 and rm.metrics["right"] == 12
    checks = [v.check for v in rm.verdicts]
    assert checks[:2] == ["rm_distribution", "reward_truth"] and "rm_probe_wrong_answer" in checks
    assert rm.verdicts[1].numbers["n"] == 24 and "scores" in rm.figures


def test_a_plain_token_prm_gets_check_2_and_the_step_metrics_from_step_labels(plain_rms, tmp_path):
    result = rc.rm_check(plain_rms["token"], STEP_DATA / "prm_data.jsonl", world=None)
    checks = [v.check for v in result.verdicts]
    assert result.kind == "PRM" and checks[:3] == ["prm_distribution", "low_ra_share", "reward_truth"]
    steps = result.metrics["steps"]
    assert steps["solutions"] + steps["unscored"] == len(rc.read_check_data(STEP_DATA / "prm_data.jsonl").rows)
    assert "processbench" in steps["at_0.5"] and "prmbench" in steps["at_0.5"]


def test_a_prm_on_preference_pairs_gets_their_accuracy_and_probes_on_the_chosen(plain_rms, tmp_path):
    rows = _arith_rows(12)
    pairs = [{"prompt": r["question"], "chosen": r["solution"], "rejected": w["solution"]}
             for r, w in zip(rows[0::2], rows[1::2])]
    result = rc.rm_check(plain_rms["token"], _jsonl(tmp_path / "pairs.jsonl", pairs))
    checks = [v.check for v in result.verdicts]
    assert checks[:2] == ["prm_distribution", "preference_accuracy"] and "prm_probe_wrong_answer" in checks
    assert result.verdicts[0].numbers["n"] == 12 and result.verdicts[1].numbers["pairs"] == 6


def test_a_lora_adapter_of_a_reward_model_is_loaded_on_its_base(plain_rms, small_model_dir):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification

    from rleif_kit.models.loading import load_tokenizer

    base = AutoModelForSequenceClassification.from_pretrained(str(plain_rms["seq"]), num_labels=1)
    torch.manual_seed(1)
    lora = get_peft_model(base, LoraConfig(task_type="SEQ_CLS", r=4, lora_alpha=8, target_modules=["q_proj"]))
    out = plain_rms["root"] / "lora"
    lora.save_pretrained(out)
    load_tokenizer(str(small_model_dir)).save_pretrained(out)
    assert rc.model_head(out) == ("sequence", "adapter_config.json")
    loaded = rc.load_reward_model(out)
    assert loaded.head == "sequence" and not hasattr(loaded.model, "peft_config")  # merged
    assert len(rc.irm_scorer(loaded.model, loaded.tokenizer)(["Tom has 3 pens."])) == 1


# ------------------------------------------------------------------ the gallery: a broken reward is caught

class _LengthRM:
    """A reward that reads the length alone (the gallery's length-rewarding scorer) as a sequence classifier: its
    logit is the number of tokens over 40, minus 1."""

    def __init__(self):
        import torch

        self.module = torch.nn.Linear(1, 1)
        self.training = False

    def parameters(self):
        return self.module.parameters()

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self

    def __call__(self, input_ids, attention_mask, **_):
        from types import SimpleNamespace

        return SimpleNamespace(logits=(attention_mask.sum(-1, keepdim=True).float() / 40 - 1))


def test_a_length_rewarding_rm_fails_the_answer_probes_and_exits_1(small_model_dir, tmp_path, monkeypatch, capsys):
    from rleif_kit.models.loading import load_tokenizer

    length = rc.LoadedRM(_LengthRM(), load_tokenizer(str(small_model_dir)), "sequence", tmp_path / "length", "test")
    data = _jsonl(tmp_path / "judged.jsonl", _arith_rows(40))
    verdicts = {v.check: v for v in rc.rm_check(length, data, kind="rm").verdicts}
    wrong = verdicts["rm_probe_wrong_answer"]
    assert wrong.status == "fail" and wrong.numbers["moved_right"] <= 0.4, wrong  # no shorter, so not lower
    assert verdicts["rm_probe_corrupt_step"].status == "fail"

    monkeypatch.setattr(rc, "model_head", lambda path: ("sequence", "test"))
    monkeypatch.setattr(rc, "load_reward_model", lambda path, bf16=False: length)
    out = tmp_path / "out"
    assert main(["rm-check", "--model", str(tmp_path / "length"), "--data", str(data), "--kind", "rm",
                 "--out", str(out)]) == 1
    printed = capsys.readouterr().out
    assert re.search(r"\nrm_probe_wrong_answer +FAIL ", printed) and "FAIL: a check failed (exit 1)" in printed
    saved = json.loads((out / "rm_check.json").read_text())
    assert saved["failed"] and {v["check"]: v["status"] for v in saved["verdicts"]}["rm_probe_wrong_answer"] == "fail"


class _TemplateIRM(_LengthRM):
    """The gallery's IRM that rewards one operator's template wording: 0.9 when the text says "at the end", else
    0.3 (as logits), whatever the task asks."""

    def __init__(self, tokenizer):
        super().__init__()
        self.tokenizer = tokenizer

    def __call__(self, input_ids, attention_mask, **_):
        import math
        from types import SimpleNamespace

        import torch

        texts = self.tokenizer.batch_decode(input_ids, skip_special_tokens=True)
        logit = lambda p: math.log(p / (1 - p))  # noqa: E731
        return SimpleNamespace(logits=torch.tensor([[logit(0.9 if "at the end" in t else 0.3)] for t in texts]))


def test_an_irm_that_rewards_template_wording_fails_the_instruction_probe(small_model_dir, tmp_path):
    from rleif_kit.models.loading import load_tokenizer

    tok = load_tokenizer(str(small_model_dir))
    irm = rc.LoadedRM(_TemplateIRM(tok), tok, "sequence", tmp_path / "template", "test")
    texts = [{"text": f"Tom has {i} pens and buys {i + 2} more{' at the end' if i % 2 else ''}. How many?"}
             for i in range(3, 23)]
    verdicts = {v.check: v for v in rc.rm_check(irm, _jsonl(tmp_path / "texts.jsonl", texts)).verdicts}
    removed = verdicts["irm_probe_number_removed"]
    assert removed.status == "fail" and removed.numbers["moved_right"] == 0.0, removed  # every pair tied
    assert verdicts["irm_distribution"].numbers["mean"] == pytest.approx(0.6)  # half 0.9, half 0.3


def test_dry_run_tells_the_head_and_reads_the_data(plain_rms, tmp_path, capsys):
    data = _jsonl(tmp_path / "j.jsonl", _arith_rows(4))
    assert main(["rm-check", "--model", str(plain_rms["token"]), "--data", str(data), "--dry-run"]) == 0
    assert capsys.readouterr().out == (f"{plain_rms['token']}: token head (told by config.json); {data}: 4 rows of "
                                       "judged\n")
