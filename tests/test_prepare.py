"""Stage 00's data step on the 7B preset with GSM8k/MATH-format files written here: `rleif data` builds the
seeds and the SFT set (duplicates and contaminated questions rejected with reasons), `rleif evolve --dry-run`
then plans the evolution, `rleif doctor` has no fail caused by ordering; the hub path runs on a local dataset
folder; every missing input is one line naming its key. No network."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from rleif_kit.pipeline.cli import main
from rleif_kit.prepare.seeds import CONTAMINATED
from rleif_kit.worlds.arith.gsm8k_format import gsm8k_problems

PRESET = str(ROOT / "params" / "wizardmath-7b.toml")
MATH_ROWS = [
    {"problem": "What is $1+1$?", "solution": "We have $1+1=\\boxed{2}$.", "level": "Level 1", "type": "Prealgebra"},
    {"problem": "Solve $x^2=4$. Enter all solutions, separated by commas.",
     "solution": "Step 1: Taking square roots gives $x = 2$ or $x = -2$.\nStep 2: So the answer is $\\boxed{2, -2}$.",
     "level": "Level 2", "type": "Algebra"},
]


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def raw(tmp_path):
    """GSM8k-format train (30, one repeated with other case and spacing, one copied from the test set) and test
    files, a MATH-format train file, an open-domain file and a settings file naming the test set."""
    train = gsm8k_problems(30, seed=5)
    test = gsm8k_problems(3, seed=99)
    repeat = {**train[0], "question": "  " + train[0]["question"].upper().replace(" ", "  ")}
    rows = train + [repeat, test[1]]
    d = tmp_path / "raw"
    d.mkdir()
    _write_jsonl(d / "gsm8k_train.jsonl", rows)
    _write_jsonl(d / "gsm8k_test.jsonl", test)
    _write_jsonl(d / "math_train.jsonl", MATH_ROWS)
    _write_jsonl(d / "open.jsonl", [{"instruction": "Name a colour.", "output": "Blue."}])
    (d / "settings.json").write_text(json.dumps({
        "api": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "RLEIF_TEST_KEY"},
        "models": {"evolve": "teacher", "irm_judge": "teacher", "prm_judge": "teacher"},
        "eval": {"gsm8k_path": str(d / "gsm8k_test.jsonl"), "math_path": str(d / "gsm8k_test.jsonl")},
        "prices": {"teacher": {"input_per_million": 1.0, "output_per_million": 2.0}}}))
    return d


def _sets(run: Path, raw: Path, **extra) -> list[str]:
    values = {"base.output_dir": str(run), "sft.gsm8k_train": str(raw / "gsm8k_train.jsonl"),
              "sft.math_train": str(raw / "math_train.jsonl"), "sft.open_domain_path": str(raw / "open.jsonl"),
              "sft.dataset": str(run / "stepwise.jsonl"), "evol_instruct.seeds": str(run / "seeds.jsonl"),
              "sft.build": "normalise", "eval.benchmarks": ["gsm8k"], **extra}
    return [a for k, v in values.items() for a in ("--set", f"{k}={json.dumps(v)}")]


def test_rleif_data_then_evolve_dry_run_on_the_7b_preset(tmp_path, raw, capsys, monkeypatch):
    run = tmp_path / "run"
    settings = str(raw / "settings.json")
    assert main(["data", PRESET, *_sets(run, raw), "--settings", settings]) == 0
    out = capsys.readouterr().out
    seeds = [json.loads(line) for line in (run / "seeds.jsonl").read_text().splitlines()]
    assert len(seeds) == 30 + 2  # 30 GSM8k + 2 MATH; the repeat and the test-set copy are out
    rejected = [json.loads(line) for line in (run / "00_setup" / "seeds_rejected.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rejected] == ["duplicate question", CONTAMINATED]
    assert rejected[0]["of"] == seeds[0]["id"] and rejected[1]["eval_ids"] == ["gsm8k:gsm8k-00001"]
    assert "seeds        built" in out and "32 records" in out and "rejected 1: duplicate question" in out
    assert "sft dataset  built" in out and "open domain  exists" in out
    assert "lengths are in characters" in out  # no Llama-2 tokenizer on this machine
    report = json.loads((run / "00_setup" / "data_report.json").read_text())
    assert {a["name"]: a["records"] for a in report["artifacts"]} == {"seeds": 32, "sft dataset": 32, "open domain": 1,
                                                                       "probe set": 3}  # the GSM8k test items
    probes = [json.loads(line) for line in (run / "00_setup" / "probe_set.jsonl").read_text().splitlines()]
    assert all(p["solution"].startswith("Step 1:") and "The answer is:" in p["solution"] for p in probes)
    sft = next(a for a in report["artifacts"] if a["name"] == "sft dataset")
    assert sft["rejected"][CONTAMINATED] == 1  # the SFT set is cleaned too

    monkeypatch.setenv("RLEIF_TEST_KEY", "sk-test")
    assert main(["evolve", PRESET, *_sets(run, raw), "--settings", settings, "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["seeds"] == 32 and plan["requests"] == 32 * 8 * 3 and plan["cost_usd"] > 0

    # a rerun builds nothing: the files exist and are counted, never overwritten
    before = (run / "seeds.jsonl").read_text()
    assert main(["data", PRESET, *_sets(run, raw), "--settings", settings]) == 0
    assert "seeds        exists" in capsys.readouterr().out and (run / "seeds.jsonl").read_text() == before


def test_doctor_has_no_fail_caused_by_ordering(tmp_path, raw):
    from rleif_kit.pipeline.doctor import run_doctor

    run = tmp_path / "run"
    overrides = [a for a in _sets(run, raw) if a != "--set"]
    rows = {v.check: v for v in run_doctor(PRESET, overrides, str(raw / "settings.json"), score=False).verdicts}
    assert rows["data_seeds"].status == rows["data_sft"].status == "ok"
    assert "not built yet: 00_setup" in rows["data_seeds"].advice
    assert rows["data_gsm8k_train"].numbers == {"records": 32} and rows["eval_gsm8k"].status == "ok"
    # the same config without raw data: nothing builds the seeds, and doctor says so
    bare = [a for a in _sets(run, raw, **{"sft.gsm8k_train": "", "sft.math_train": ""}) if a != "--set"]
    rows = {v.check: v for v in run_doctor(PRESET, bare, str(raw / "settings.json"), score=False).verdicts}
    assert rows["data_seeds"].status == rows["data_sft"].status == "fail"
    assert "nothing builds it" in rows["data_seeds"].advice


@pytest.mark.parametrize("change,expected", [
    ({"sft.gsm8k_train": "", "sft.math_train": ""}, "[evol_instruct] seeds = "),
    ({"sft.open_domain_path": "/nonexistent/open.jsonl"}, "[sft] open_domain_path = '/nonexistent/open.jsonl': file "
                                                          "not found"),
    ({"sft.gsm8k_train": "/nonexistent/train.jsonl"}, "[sft] gsm8k_train = '/nonexistent/train.jsonl': file not found"),
])
def test_a_missing_input_is_one_line_naming_its_key(tmp_path, raw, capsys, change, expected):
    assert main(["data", PRESET, *_sets(tmp_path / "run", raw, **change)]) == 2
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1 and "Traceback" not in err


def test_hub_loading_runs_on_a_local_dataset_folder_and_parquet(tmp_path, raw, capsys):
    pytest.importorskip("datasets")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rleif_kit.worlds.math.data import load_gsm8k, load_hub_dataset

    folder = tmp_path / "gsm8k_hf"
    folder.mkdir()
    rows = [json.loads(line) for line in (raw / "gsm8k_train.jsonl").read_text().splitlines()]
    _write_jsonl(folder / "train.jsonl", rows)
    _write_jsonl(folder / "test.jsonl", rows[:2])
    local = load_gsm8k(raw / "gsm8k_train.jsonl")
    hub = load_hub_dataset("gsm8k", "train", str(folder))
    assert [(r["question"], r["gold"]) for r in hub] == [(r["question"], r["gold"]) for r in local]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    assert [r["gold"] for r in load_gsm8k(tmp_path / "train.parquet")] == [r["gold"] for r in local]
    # the same folder through the config: [sft] gsm8k_train = "hub", gsm8k_hub = the folder
    run = tmp_path / "run"
    assert main(["data", PRESET, *_sets(run, raw, **{"sft.gsm8k_train": "hub", "sft.gsm8k_hub": str(folder),
                                                        "sft.math_train": ""})]) == 0
    assert "seeds        built" in capsys.readouterr().out


def test_an_unreachable_hub_is_one_line(tmp_path, raw, capsys, monkeypatch):
    pytest.importorskip("datasets")
    for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.setenv(var, "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    if "datasets" in sys.modules:
        monkeypatch.setattr(sys.modules["datasets"].config, "HF_HUB_OFFLINE", True)
        monkeypatch.setattr(sys.modules["datasets"].config, "HF_DATASETS_CACHE", tmp_path / "hf" / "datasets")
    assert main(["data", PRESET, *_sets(tmp_path / "run", raw, **{"sft.gsm8k_train": "hub",
                                                                     "sft.math_train": ""})]) == 2
    err = capsys.readouterr().err.strip()
    assert "could not load openai/gsm8k" in err and "pass a local file instead" in err and len(err.splitlines()) == 1


def test_lengths_are_in_tokens_when_the_base_tokenizer_is_here(tmp_path, raw, small_model_dir, capsys):
    run = tmp_path / "run"
    assert main(["data", PRESET, *_sets(run, raw, **{"base.model_name": str(small_model_dir),
                                                     "sft.max_seq_len": 64})]) == 0
    report = json.loads((run / "00_setup" / "data_report.json").read_text())
    assert report["length_unit"] == "tokens"
    sft = next(a for a in report["artifacts"] if a["name"] == "sft dataset")
    assert sft["lengths"]["max"] > sft["lengths"]["p50"] > 0 and "over_max_seq_len" in sft["lengths"]
    assert "length in tokens" in capsys.readouterr().out


def test_the_arith_world_has_nothing_to_build(tmp_path):
    from conftest import TINY_PARAMS, tiny_overrides
    from rleif_kit.core.run_setup import setup
    from rleif_kit.prepare.stage import build_data

    cfg, paths = setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run"), stage="00_setup")
    report = build_data(cfg, paths)
    assert [(a.name, a.status) for a in report.artifacts] == [("seeds", "generated"), ("sft dataset", "generated"),
                                                              ("open domain", "exists")]
    assert paths.data_report.exists()


def test_the_7b_default_regenerates_the_sft_set_through_an_endpoint(tmp_path, capsys, monkeypatch):
    """[sft] build = "regenerate" (the 7B preset's): each training problem asked of the endpoint, kept when its
    final answer equals the gold one; here the endpoint is the loopback teacher, replying in real models' styles."""
    from rleif_kit.testing.teacher import serve, settings_for

    raw = tmp_path / "raw"
    server, teacher = serve(raw, seed=7, world={"n_train": 40, "n_test": 10})
    try:
        (raw / "open.jsonl").write_text(json.dumps({"instruction": "Name a colour.", "output": "Blue."}) + "\n")
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps(settings_for(server.base_url, "RLEIF_TEST_KEY", raw)))
        monkeypatch.setenv("RLEIF_TEST_KEY", "sk-test")
        run = tmp_path / "run"
        sets = [a for a in _sets(run, raw, **{"sft.build": "regenerate"}) if a]
        assert main(["data", PRESET, *sets, "--settings", str(settings)]) == 0
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert teacher.kinds["regenerate"] == 40  # one request per training problem (30 GSM8k + 10 MATH)
    report = json.loads((run / "00_setup" / "data_report.json").read_text())
    sft = next(a for a in report["artifacts"] if a["name"] == "sft dataset")
    assert 20 <= sft["records"] < 40 and "final answer differs from gold" in sft["rejected"]  # the teacher slips
    rows = [json.loads(line) for line in (run / "stepwise.jsonl").read_text().splitlines()]
    assert all(r["response"].startswith("Step 1:") and "The answer is:" in r["response"] for r in rows)
    assert "build mode: regenerate" in out


def test_seeds_keep_operators_apart_and_short_test_copies_out():
    from rleif_kit.prepare.seeds import build_seeds

    problems = [{"id": "a", "question": "Compute $5+3$."}, {"id": "b", "question": "Compute $5-3$."},
                {"id": "c", "question": "compute  $5+3$"}, {"id": "d", "question": "What is $2+2$?"}]
    seeds, rejected = build_seeds(problems, [("math:7", "What is $2+2$?")])
    assert [s["id"] for s in seeds] == ["a", "b"]
    assert [(r["id"], r["reason"]) for r in rejected] == [("c", "duplicate question"), ("d", CONTAMINATED)]


def test_a_math_root_folder_with_its_test_split_is_refused(tmp_path, raw, capsys):
    root = tmp_path / "MATH"
    for split in ("train", "test"):
        (root / split / "algebra").mkdir(parents=True)
        (root / split / "algebra" / "1.json").write_text(json.dumps(MATH_ROWS[0]))
    assert main(["data", PRESET, *_sets(tmp_path / "run", raw, **{"sft.math_train": str(root)})]) == 2
    assert "holds a test/ folder: point it at the training split" in capsys.readouterr().err
    assert main(["data", PRESET, *_sets(tmp_path / "run", raw, **{"sft.math_train": str(root / "train")})]) == 0


def test_regenerate_never_leaves_a_partial_set_behind(tmp_path, raw, capsys, monkeypatch):
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    def reply(body):  # every third problem fails for good (a 500 after the client's retries)
        text = body["messages"][0]["content"]
        if sum(map(ord, text)) % 3 == 0:
            raise RuntimeError("down")
        return "Step 1: 1 + 1 = 2. The answer is: 2"

    with FakeOpenAIServer(responder=reply) as server:
        settings = json.loads((raw / "settings.json").read_text())
        settings["api"].update(base_url=server.base_url, max_retries=0)
        (raw / "settings.json").write_text(json.dumps(settings))
        monkeypatch.setenv("RLEIF_TEST_KEY", "sk-test")
        run = tmp_path / "run"
        code = main(["data", PRESET, *_sets(run, raw, **{"sft.build": "regenerate"}), "--settings",
                     str(raw / "settings.json")])
    err = capsys.readouterr().err
    assert code == 4 and "problems have no answer yet" in err and "rerun to continue" in err  # resumable: stopped
    assert not (run / "stepwise.jsonl").exists() and (run / "stepwise.regenerate.jsonl").exists()


def test_the_teacher_never_writes_over_files_it_did_not_write(tmp_path, raw):
    from rleif_kit.testing.teacher import World, write_data

    with pytest.raises(FileExistsError, match="the teacher did not write"):
        write_data(raw, World(0, n_train=10, n_test=2))
    write_data(tmp_path / "toy", World(0, n_train=10, n_test=2))
    write_data(tmp_path / "toy", World(0, n_train=10, n_test=2))  # its own folder: written again


def test_a_file_built_from_other_inputs_is_named(tmp_path, raw, capsys):
    run = tmp_path / "run"
    assert main(["data", PRESET, *_sets(run, raw)]) == 0
    capsys.readouterr()
    assert main(["data", PRESET, *_sets(run, raw, **{"dedup.decontam_ngram": 20})]) == 0
    assert "was built from other inputs (decontam_ngram 13 -> 20); delete it to rebuild" in capsys.readouterr().out
