"""Issue 30, items 7 and 8: a seeds file rewritten in place (same ids, new text) or a local ``hf_model`` retrained in
place makes 01_evolve's records stale, as a changed path does; a kit file replaced by a directory is one clear line
naming the path and the fix, not a traceback.

Offline: the loopback FakeOpenAIServer with the real openai client, the arith world's own evolver.
"""

from __future__ import annotations

import json
import types

import pytest

from conftest import TINY_PARAMS, tiny_overrides
from rleif_kit.core.jsonl import JsonlWriter, KitFileError, read_jsonl, repair_torn_tail, write_jsonl
from rleif_kit.core.records import write_json_atomic
from rleif_kit.core.run_setup import setup
from rleif_kit.evolve.stage import claim_records, evolution_meta, run_evolve

KEY_ENV = "RLEIF_TEST_STALE_KEY"


def _setup(tmp_path, *extra):
    return setup(str(TINY_PARAMS), tiny_overrides(tmp_path / "run", *extra), stage="01_evolve",
                 report_dir=str(tmp_path / "reports"))


def _write_seeds(path, texts):
    path.write_text("".join(json.dumps({"id": f"s{i}", "instruction": t}) + "\n" for i, t in enumerate(texts)))


def responder(body: dict) -> str:
    content = body["messages"][-1]["content"]
    if content.startswith("Solve the problem"):
        return "Step 1: 2 + 3 = 5. The answer is: 5"
    if "Original problem:" not in content:
        return "Different"
    original = content.split("Original problem:\n", 1)[1].strip()
    return f"{original} Then {len(original) % 9 + 2} more are added."


# ------------------------------------------------------------------ 7. what the seeds file and the model held


def test_a_seeds_file_rewritten_in_place_moves_the_old_records_aside(tmp_path, monkeypatch, capsys):
    from rleif_kit.core.settings import load_settings
    from rleif_kit.testing.fake_openai import FakeOpenAIServer

    monkeypatch.setenv(KEY_ENV, "sk-stale-test-key-0123456789")
    seeds = tmp_path / "seeds.jsonl"
    _write_seeds(seeds, [f"Tom has {i + 3} apples and buys {i + 2} more. How many apples does he have?"
                         for i in range(6)])
    extra = ('evol_instruct.backend="openai"', f'evol_instruct.seeds="{seeds}"', "evol_instruct.rounds=1",
             "evol_instruct.cache=false", "evol_instruct.equality_judge=false")
    with FakeOpenAIServer(responder=responder) as server:
        settings = tmp_path / "settings.json"
        settings.write_text(json.dumps({"api": {"base_url": server.base_url, "api_key_env": KEY_ENV,
                                                "max_retries": 0}, "models": {"evolve": "fake-evolver"}}))
        cfg, paths = _setup(tmp_path, *extra)
        run_evolve(cfg, paths, load_settings(settings), progress=False)
        old = paths.evolved.read_text()
        assert "Tom has 3 apples" in old
        run_evolve(cfg, paths, load_settings(settings), progress=False)  # the same file: resumed, nothing stale
        assert not paths.evolved.with_suffix(".stale.jsonl").exists()
        capsys.readouterr()
        # what `rleif data` does when its inputs change: the same ids, new text, at the same path
        _write_seeds(seeds, [f"Ann reads {i + 4} pages a day for {i + 2} days. How many pages?" for i in range(6)])
        again = run_evolve(cfg, paths, load_settings(settings), progress=False)
    note = capsys.readouterr().out
    assert "records were made with other inputs.seeds; moved to *.stale.jsonl, evolving again" in note
    assert paths.evolved.with_suffix(".stale.jsonl").read_text() == old  # kept aside, not deleted
    kept = list(read_jsonl(paths.evolved))
    assert again.kept == len(kept) > 0 and all("Ann reads" in r["text"] for r in kept)  # from the new seeds


def test_a_meta_from_before_the_inputs_were_kept_does_not_throw_the_records_away(tmp_path):
    cfg, paths = _setup(tmp_path, 'evol_instruct.backend="world"', 'evol_instruct.seeds="arith:5"')
    meta = json.loads(json.dumps(evolution_meta(cfg, types.SimpleNamespace(model="m"))))
    paths.evolved.parent.mkdir(parents=True, exist_ok=True)
    paths.evolved.write_text(json.dumps({"id": "a-r1-x", "round": 1}) + "\n")
    write_json_atomic(paths.evolve_meta, {k: v for k, v in meta.items() if k != "inputs"})  # an older kit's meta
    assert claim_records(paths, meta) is None and paths.evolved.exists()
    assert json.loads(paths.evolve_meta.read_text())["inputs"] == meta["inputs"]  # kept from now on


def test_a_local_hf_model_retrained_in_place_changes_the_meta(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"\0" * 64)
    cfg, _ = _setup(tmp_path, 'evol_instruct.backend="hf"', f'evol_instruct.hf_model="{model}"')
    before = evolution_meta(cfg, types.SimpleNamespace(model=str(model)))
    assert before["inputs"]["hf_model"] and evolution_meta(cfg, types.SimpleNamespace(model=str(model))) == before
    (model / "model.safetensors").write_bytes(b"\1" * 128)  # retrained: the same path, other weights
    after = evolution_meta(cfg, types.SimpleNamespace(model=str(model)))
    assert after["inputs"]["hf_model"] != before["inputs"]["hf_model"]
    assert after["evol_instruct"] == before["evol_instruct"]  # the path alone never said so


# ------------------------------------------------------------------ 8. a directory where a kit file belongs


def test_a_directory_where_a_jsonl_file_belongs_is_one_clear_error(tmp_path):
    path = tmp_path / "failed.jsonl"
    path.mkdir()
    for action in (lambda: list(read_jsonl(path)), lambda: JsonlWriter(path), lambda: repair_torn_tail(path),
                   lambda: write_jsonl(path, [{"id": "a"}]), lambda: write_json_atomic(path, {"a": 1})):
        with pytest.raises(KitFileError) as err:
            action()
        message = str(err.value)
        assert "\n" not in message and str(path) in message and "is a directory" in message
        assert "move that directory away (or delete it) and rerun" in message
    blocker = tmp_path / "01_evolve"
    blocker.write_text("oops")  # a file where the stage's folder belongs
    with pytest.raises(KitFileError, match=r"01_evolve is a file, where the kit needs a directory"):
        JsonlWriter(blocker / "evolved.jsonl")
    with pytest.raises(KitFileError, match=r"01_evolve is a file"):
        list(read_jsonl(blocker / "evolved.jsonl"))


def test_rleif_evolve_with_failed_jsonl_a_directory_exits_2_with_one_line(tmp_path, capsys):
    from rleif_kit.pipeline.cli import main

    extra = ('evol_instruct.backend="world"', 'evol_instruct.seeds="arith:5"', "evol_instruct.rounds=1")
    failed = tmp_path / "run" / "01_evolve" / "failed.jsonl"
    failed.mkdir(parents=True)
    code = main(["evolve", str(TINY_PARAMS), *[a for o in tiny_overrides(tmp_path / "run", *extra)
                                              for a in ("--set", o)]])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "it/s" not in line]
    assert code == 2 and len(err) == 1, err
    assert "failed.jsonl is a directory, where the kit keeps a file" in err[0] and "Traceback" not in err[0]


# ------------------------------------------------------------------ issue 42, item 6: fewer rounds or seeds


def _evolved(paths) -> list[dict]:
    return list(read_jsonl(paths.evolved)) + list(read_jsonl(paths.eliminated))


def test_fewer_rounds_set_the_later_rounds_records_aside_with_a_note(tmp_path, capsys):
    world = ('evol_instruct.backend="world"', 'evol_instruct.seeds="arith:6"')
    cfg, paths = _setup(tmp_path, *world, "evol_instruct.rounds=3")
    run_evolve(cfg, paths, progress=False)
    before = _evolved(paths)
    third = sorted(r["id"] for r in before if r["round"] == 3)
    assert third and len(third) < len(before)
    capsys.readouterr()
    cfg, paths = _setup(tmp_path, *world, "evol_instruct.rounds=2")  # lowered on the same output
    result = run_evolve(cfg, paths, progress=False)
    out = capsys.readouterr().out
    assert (f"01_evolve: {len(third)} records of a round past [evol_instruct] rounds = 2 moved to *.surplus.jsonl "
            "(kept aside, not used by later stages)") in out
    assert sorted(r["id"] for r in _evolved(paths)) == sorted(r["id"] for r in before if r["round"] <= 2)
    aside = [r for p in paths.evolved.parent.glob("*.surplus.jsonl") for r in read_jsonl(p)]
    assert sorted(r["id"] for r in aside) == third  # kept, not deleted
    assert result.kept == len(list(read_jsonl(paths.evolved))) and 3 not in result.per_round
    run_evolve(cfg, paths, progress=False)  # a rerun finds nothing more to set aside
    assert "surplus" not in capsys.readouterr().out


def test_fewer_seeds_leave_no_record_of_a_dropped_seed(tmp_path, capsys):
    world = ('evol_instruct.backend="world"', "evol_instruct.rounds=2")
    cfg, paths = _setup(tmp_path, *world, 'evol_instruct.seeds="arith:6"')
    run_evolve(cfg, paths, progress=False)
    capsys.readouterr()
    cfg, paths = _setup(tmp_path, *world, 'evol_instruct.seeds="arith:6"', "evol_instruct.max_seeds=4")
    run_evolve(cfg, paths, progress=False)
    assert "moved to *.stale.jsonl" in capsys.readouterr().out or any(paths.evolved.parent.glob("*.surplus.jsonl"))
    from rleif_kit.worlds.data import load_seeds
    roots = {s["root_id"] for s in load_seeds(cfg, paths)}
    assert len(roots) == 4 and {r["root_id"] for r in _evolved(paths)} <= roots


def test_records_of_a_seed_gone_from_the_seeds_are_set_aside(tmp_path):
    from rleif_kit.evolve.stage import set_aside_surplus

    _, paths = _setup(tmp_path, 'evol_instruct.backend="world"')
    paths.evolved.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"id": f"{root}-r{k}", "root_id": root, "round": k} for root in ("a", "b") for k in (1, 2, 3)]
    write_jsonl(paths.evolved, rows)
    note = set_aside_surplus(paths, 2, {"a"})
    assert note == ("01_evolve: 4 records of a round past [evol_instruct] rounds = 2 and a seed no longer among the "
                    "seeds moved to *.surplus.jsonl (kept aside, not used by later stages)")
    assert [r["id"] for r in read_jsonl(paths.evolved)] == ["a-r1", "a-r2"]
    assert [r["id"] for r in read_jsonl(paths.evolved.with_suffix(".surplus.jsonl"))] == ["a-r3", "b-r1", "b-r2",
                                                                                          "b-r3"]
    assert set_aside_surplus(paths, 2, {"a"}) is None  # nothing left to move
