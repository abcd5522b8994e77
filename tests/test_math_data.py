"""GSM8k / MATH loaders on small fixture files under tmp_path; the hub loader offline. No network."""
from __future__ import annotations

import json
import sys

import pytest

from rleif_kit.worlds.math.data import last_boxed, load_gsm8k, load_hub_dataset, load_math
from rleif_kit.worlds.math.stepwise import normalise_gsm8k

NATALIA_Q = ("Natalia sold clips to 48 of her friends in April, and then she sold half as many clips "
             "in May. How many clips did Natalia sell altogether in April and May?")
NATALIA_A = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
             "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")
HALF = {"problem": "What is $\\frac{2}{4}$ in lowest terms?", "level": "Level 1", "type": "Prealgebra",
        "solution": "Divide top and bottom by 2: $\\frac{2}{4} = \\boxed{\\frac{1}{2}}$."}
SQRT = {"problem": "Simplify $\\sqrt{8}$.", "level": "Level 2", "type": "Algebra",
        "solution": "$\\sqrt{8} = \\sqrt{4 \\cdot 2} = \\boxed{2\\sqrt{2}}$."}


def write_jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_load_gsm8k(tmp_path):
    path = write_jsonl(tmp_path / "train.jsonl", [
        {"question": NATALIA_Q, "answer": NATALIA_A}, "",
        {"question": "Big?", "answer": "10 * 100 = 1,000\n#### 1,000"},
        {"id": "own-7", "question": "Q?", "answer": "1 + 1 = 2\n####2"}])
    records = load_gsm8k(path)
    assert [r["id"] for r in records] == ["gsm8k-00000", "gsm8k-00001", "own-7"]  # blank line skipped
    assert records[0] == {"id": "gsm8k-00000", "question": NATALIA_Q, "solution": NATALIA_A, "gold": "72"}
    assert [r["gold"] for r in records[1:]] == ["1000", "2"]
    assert normalise_gsm8k(records[0]["solution"]).endswith("The answer is: 72")


@pytest.mark.parametrize("bad,message", [
    ({"question": "Q?"}, "missing field 'answer'"), ({"answer": "#### 1"}, "missing field 'question'"),
    ({"question": "Q?", "answer": "no hashes"}, "no '#### <answer>' line"),
    ({"question": "", "answer": "#### 1"}, "'question' must be a non-empty string"),
    ("[1, 2]", "expected a JSON object"), ('{"question": "Q?", ', "invalid JSON"),
])
def test_load_gsm8k_malformed_record_names_file_and_line(tmp_path, bad, message):
    path = write_jsonl(tmp_path / "bad.jsonl", [{"question": "Q?", "answer": "#### 1"}, bad])
    with pytest.raises(ValueError, match=message) as err:
        load_gsm8k(path)
    assert f"{path}:2:" in str(err.value)


def test_load_math_jsonl(tmp_path):
    path = write_jsonl(tmp_path / "math.jsonl", [HALF, {**SQRT, "id": "sqrt"},
                                                 {"problem": "1+1?", "solution": "It is $\\boxed{2}$."}])
    records = load_math(path)
    assert records[0] == {"id": "math-00000", "question": HALF["problem"], "solution": HALF["solution"],
                          "gold": "\\frac{1}{2}", "level": "Level 1", "type": "Prealgebra"}
    assert (records[1]["id"], records[1]["gold"]) == ("sqrt", "2\\sqrt{2}")
    assert (records[2]["level"], records[2]["type"]) == (None, None)


def test_load_math_directory_of_json_files(tmp_path):
    root = tmp_path / "MATH"
    for rel, rec in (("train/prealgebra/12.json", HALF), ("train/algebra/3.json", SQRT)):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(rec))
    (root / "README.txt").write_text("not a problem")
    records = load_math(root)
    assert [(r["id"], r["gold"]) for r in records] == [("math-train-algebra-3", "2\\sqrt{2}"),
                                                       ("math-train-prealgebra-12", "\\frac{1}{2}")]


def test_load_math_malformed_records(tmp_path):
    path = write_jsonl(tmp_path / "math.jsonl", [HALF, HALF, {"problem": "P?"}])
    with pytest.raises(ValueError, match=f"{path}:3: missing field 'solution'"):
        load_math(path)
    write_jsonl(path, [{"problem": "P?", "solution": "no box"}])
    with pytest.raises(ValueError, match=r"math.jsonl:1: .*no \\boxed"):
        load_math(path)
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "1.json").write_text("{broken")
    with pytest.raises(ValueError, match=r"1.json:1: invalid JSON"):
        load_math(tmp_path / "dir")


def test_last_boxed_nested_braces_and_fbox():
    assert last_boxed("\\boxed{1} then \\boxed{\\frac{a^{2}}{\\sqrt{b}}}.") == "\\frac{a^{2}}{\\sqrt{b}}"
    assert last_boxed("so \\fbox{\\{1, 2\\}}") == "\\{1, 2\\}"
    assert last_boxed("no box") is None


def _offline(monkeypatch, tmp_path):
    """Offline and with an empty cache, so the hub loader fails fast even if run twice."""
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    if "datasets" in sys.modules:  # already imported by another test: its config read the env then
        monkeypatch.setattr(sys.modules["datasets"].config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(sys.modules["datasets"].config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")


@pytest.mark.parametrize("name", ["gsm8k", "math"])
def test_load_hub_dataset_offline_says_to_pass_a_local_file(monkeypatch, tmp_path, name):
    pytest.importorskip("datasets")
    _offline(monkeypatch, tmp_path)
    with pytest.raises(RuntimeError, match="pass a local file instead") as err:
        load_hub_dataset(name, "test")
    # hendrycks/competition_math was taken down: the default MATH copy keeps the original fields
    assert ("openai/gsm8k" if name == "gsm8k" else "DigitalLearningGmbH/MATH-lighteval") in str(err.value)


def test_load_hub_dataset_converts_rows_and_rejects_unknown_names(monkeypatch):
    datasets = pytest.importorskip("datasets")
    rows = [{"question": NATALIA_Q, "answer": NATALIA_A}]
    monkeypatch.setattr(datasets, "load_dataset", lambda repo, config, split: rows)
    assert load_hub_dataset("gsm8k", "train")[0]["gold"] == "72"
    with pytest.raises(ValueError, match="unknown hub dataset"):
        load_hub_dataset("mmlu", "test")
