"""Issue 42, item 1: a full disk stops a stage with one line naming the path and the free space there (exit 5), and
a checkpoint it cut short never breaks the rerun.

Where the machine lets an unprivileged user mount (``unshare -rm``), the disk is a real 1 MiB tmpfs: Python's
``[Errno 28]`` and torch's writer's ``unexpected pos``, as they come. The SFT checkpoint cut short is injected
(torch's writer failing on checkpoint-4, little space left): a tmpfs sized to fit one checkpoint but not two would
depend on the model's size.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rleif_kit.core import disk
from rleif_kit.core.exits import EXIT_DISK_FULL, DiskFull
from rleif_kit.core.stage_args import run_entry_point
from rleif_kit.pipeline.runner import _disk_full

ROOT = Path(__file__).resolve().parent.parent
TORCH_FULL = "[enforce fail at inline_container.cc:672] . unexpected pos 5376 vs 5268"


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    got = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /tmp"],
                         capture_output=True, timeout=30)
    return got.returncode == 0


def _on_small_disk(tmp_path: Path, script: str) -> subprocess.CompletedProcess:
    """``script`` run by Python with ``sys.argv[1]`` a fresh 1 MiB tmpfs."""
    if not _can_mount():
        pytest.skip("unshare -rm cannot mount a tmpfs here")
    mnt, code = tmp_path / "small", tmp_path / "script.py"
    mnt.mkdir()
    code.write_text(textwrap.dedent(script))
    shell = f'mount -t tmpfs -o size=1m tmpfs "{mnt}" && exec "{sys.executable}" "{code}" "{mnt}"'
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(["unshare", "-rm", "sh", "-c", shell], capture_output=True, text=True, timeout=120, env=env)


def test_a_record_writer_on_a_full_disk_ends_the_stage_with_one_line_and_exit_5(tmp_path):
    got = _on_small_disk(tmp_path, """
        import sys
        from rleif_kit.core.jsonl import JsonlWriter
        from rleif_kit.core.stage_args import run_entry_point

        def main():
            with JsonlWriter(sys.argv[1] + "/evolved.jsonl") as out:
                while True:
                    out.write({"instruction": "x" * 4000})

        sys.exit(run_entry_point("evolve", main))
    """)
    assert got.returncode == EXIT_DISK_FULL, got.stderr  # the old code: a traceback, exit 1
    assert got.stderr.count("\n") == 1 and "Traceback" not in got.stderr
    assert got.stderr.startswith("python -m rleif_kit.evolve: error: no space left on device writing ")
    assert "evolved.jsonl (0 MiB free there)" in got.stderr


def test_torchs_unexpected_pos_on_a_full_disk_is_told_by_the_space_left(tmp_path):
    got = _on_small_disk(tmp_path, """
        import sys
        import torch
        from rleif_kit.core.disk import DiskFull, writing

        try:  # 4 MiB of zeros onto 1 MiB: RuntimeError "[enforce fail at inline_container.cc] unexpected pos"
            with writing(sys.argv[1] + "/optimizer.pt"):
                torch.save(torch.zeros(1 << 20), sys.argv[1] + "/optimizer.pt")
        except DiskFull as e:
            print("DiskFull:", e)
        except RuntimeError as e:
            print("RuntimeError:", e)
    """)
    assert got.stdout.startswith("DiskFull: no space left on device writing "), got.stdout + got.stderr
    assert "optimizer.pt (0 MiB free there)" in got.stdout


def test_torchs_writer_failing_with_room_to_spare_keeps_its_own_error(tmp_path, monkeypatch):
    monkeypatch.setattr(disk, "free_bytes", lambda path: 5 << 30)
    with pytest.raises(RuntimeError, match="unexpected pos"), disk.writing(tmp_path / "checkpoint-30", 48 << 20):
        raise RuntimeError(TORCH_FULL)
    monkeypatch.setattr(disk, "free_bytes", lambda path: 12 << 20)
    with pytest.raises(DiskFull) as caught, disk.writing(tmp_path / "checkpoint-30", 48 << 20):
        raise RuntimeError(TORCH_FULL)
    assert str(caught.value).startswith("no space left on device writing ")
    assert "checkpoint-30 (12 MiB free there; it needs about 48 MiB)" in str(caught.value)


def test_a_full_disk_no_writer_named_is_still_one_line(tmp_path, capsys):
    def main():  # a write the kit did not wrap: Python's own error, with the file it names
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "report.html"))

    assert run_entry_point("dedup", main) == EXIT_DISK_FULL  # the old code: the OSError's traceback
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m rleif_kit.dedup: error: no space left on device writing ")
    assert "report.html" in err


def test_a_notebooks_full_disk_is_one_line_from_rleif_run():
    line = "no space left on device writing out/03_sft/checkpoint-4 (0 MiB free there)"
    assert _disk_full("DiskFull", line) == line
    assert _disk_full("OSError", "[Errno 28] No space left on device").startswith("no space left on device ([Errno 28]")
    assert _disk_full("OperationalError", "database or disk is full").startswith("no space left on device")
    assert _disk_full("OSError", "[Errno 13] Permission denied") == ""
    assert _disk_full("RuntimeError", TORCH_FULL) == ""  # no path to look at: the stage's own wrapper tells it


# --------------------------------------------------------------------- an SFT checkpoint cut short

FAST = ("sft.dataset=\"arith:200\"", "sft.eval_samples=0", "sft.logging_steps=1", "sft.batch_size=8",
        "sft.open_domain_samples=2", "tiny.corpus_problems=200", "tiny.vocab_size=400", "tiny.hidden_size=32",
        "tiny.intermediate_size=64", "sft.max_steps=6", "sft.save_steps=2", "sft.finetune=\"full\"")


def _train(cfg, paths):
    from rleif_kit.sft.examples import build_sft_examples
    from rleif_kit.sft.stage import train_sft
    from rleif_kit.worlds.tiny_corpus import ensure_base_model

    return train_sft(cfg, paths, build_sft_examples(cfg, paths), ensure_base_model(cfg))


@pytest.mark.slow
def test_a_checkpoint_cut_short_by_a_full_disk_is_one_line_and_the_rerun_resumes_past_it(tiny_cfg, monkeypatch,
                                                                                         capsys):
    import torch

    cfg, paths = tiny_cfg(*FAST)
    real_save = torch.save

    def full_at_checkpoint_4(obj, f, *args, **kwargs):  # torch's writer, out of space halfway through a checkpoint
        if "checkpoint-4" in str(f):
            Path(f).write_bytes(b"PK\x03\x04")
            raise RuntimeError(TORCH_FULL)
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_at_checkpoint_4)
    monkeypatch.setattr(disk, "free_bytes", lambda path: 3 << 20)
    with pytest.raises(DiskFull) as caught:  # the old code: torch's RuntimeError, "No space left" nowhere
        _train(cfg, paths)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("no space left on device writing ")
    assert "03_sft/checkpoints/checkpoint-4 (3 MiB free there; it needs about " in message
    assert (paths.sft_checkpoints / "checkpoint-2" / "trainer_state.json").is_file()
    assert not (paths.sft_checkpoints / "checkpoint-4" / "trainer_state.json").exists()

    monkeypatch.setattr(torch, "save", real_save)  # space freed: the rerun sets checkpoint-4 aside, resumes at 2
    capsys.readouterr()
    trainer, _, _ = _train(cfg, paths)  # the old code: FileNotFoundError: .../checkpoint-4/trainer_state.json
    assert trainer.state.global_step == 6
    assert "checkpoint-4 is incomplete" in capsys.readouterr().out
    assert (paths.sft_checkpoints / "incomplete-checkpoint-4").is_dir()
    assert (paths.sft_checkpoints / "checkpoint-6" / "trainer_state.json").is_file()
    steps = [json.loads(line)["step"] for line in paths.sft_log.read_text().splitlines() if '"loss"' in line]
    assert steps == [1, 2, 3, 4, 5, 6]  # steps 3 and 4, logged before the failed save, are in the log once


def test_rleifs_commands_print_a_full_disk_in_one_line_with_exit_5(tmp_path, monkeypatch, capsys):
    from rleif_kit.pipeline import cli

    def evolve(args):  # what the record writer raises on a full disk, and sqlite's own words where none wrapped it
        raise disk.disk_full(tmp_path / "01_evolve" / "evolved.jsonl")

    monkeypatch.setitem(cli.HANDLERS, "config", evolve)
    assert cli.main(["config", "params/tiny-cpu.toml"]) == EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rleif config: error: no space left on device writing ")

    import sqlite3

    def cache(args):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setitem(cli.HANDLERS, "config", cache)
    assert cli.main(["config", "params/tiny-cpu.toml"]) == EXIT_DISK_FULL  # the old code: sqlite's traceback
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rleif config: error: no space left on device (database or disk")


def test_a_merged_sft_model_cut_short_is_never_taken_for_the_model(tmp_path, monkeypatch):
    from rleif_kit.core.config import load_config
    from rleif_kit.core.paths import RunPaths
    from rleif_kit.models import loading

    cfg = load_config(str(ROOT / "params" / "tiny-cpu.toml"), [f'base.output_dir="{tmp_path}"'], workdir=ROOT)
    paths = RunPaths(tmp_path)
    paths.sft_model.mkdir(parents=True)
    (paths.sft_model / loading.SFT_INFO).write_text(json.dumps({"finetune": "lora", "base_model": "base"}))
    room = {"left": False}

    class Saves:  # save_pretrained writes config.json first, as transformers does, then the weights
        def save_pretrained(self, folder):
            (Path(folder) / "config.json").write_text("{}")
            if not room["left"]:
                raise OSError(errno.ENOSPC, "No space left on device", str(Path(folder) / "model.safetensors"))
            (Path(folder) / "model.safetensors").write_bytes(b"weights")

    monkeypatch.setattr(loading, "load_merged", lambda path: (Saves(), Saves()))
    with pytest.raises(DiskFull, match="no space left on device writing "):  # the old code: OSError's traceback
        loading.resolve_rm_base(cfg, paths, "sft", "reward_model.rm_base")
    assert not (paths.sft_merged / "config.json").exists()  # the old code left it: every rerun took the half model
    room["left"] = True
    assert loading.resolve_rm_base(cfg, paths, "sft", "reward_model.rm_base") == str(paths.sft_merged)
    assert (paths.sft_merged / "model.safetensors").read_bytes() == b"weights"


def test_an_sft_model_save_cut_short_leaves_the_model_that_was_there(tmp_path, monkeypatch):
    from rleif_kit.sft import stage

    out = tmp_path / "03_sft" / "model"
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"the last complete save")
    (out / "sft_info.json").write_text("{}")

    class Tokenizer:
        padding_side = "right"

    def full(model, tokenizer, folder, files):  # the weights' first bytes, then the disk is full
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.safetensors").write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(stage.dist, "save_model_dir", full)
    with pytest.raises(DiskFull, match=r"no space left on device writing \S*03_sft/model \("):
        stage.save_model(object(), Tokenizer(), out, {"finetune": "full"})  # the old code: OSError, half a model
    assert (out / "model.safetensors").read_bytes() == b"the last complete save"

    def whole(model, tokenizer, folder, files):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.safetensors").write_bytes(b"new")
        for name, text in files.items():
            (folder / name).write_text(text)

    monkeypatch.setattr(stage.dist, "save_model_dir", whole)
    stage.save_model(object(), Tokenizer(), out, {"finetune": "full"})
    assert (out / "model.safetensors").read_bytes() == b"new" and json.loads((out / "sft_info.json").read_text())
    assert not out.with_name("model.tmp").exists()
