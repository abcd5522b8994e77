"""paths.staged_dir: a directory artifact appears whole or not at all."""

from __future__ import annotations

import pytest

from rleif_kit.core.paths import staged_dir


def test_a_finished_block_replaces_the_old_directory(tmp_path):
    target = tmp_path / "step-10"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with staged_dir(target) as tmp:
        assert tmp != target and tmp.is_dir() and not any(tmp.iterdir())
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-10"]  # no temp folder left


def test_a_crash_inside_the_block_leaves_the_old_directory_as_it_was(tmp_path):
    target = tmp_path / "model"
    target.mkdir()
    (target / "weights").write_text("good")
    with pytest.raises(RuntimeError):
        with staged_dir(target) as tmp:
            (tmp / "weights").write_text("half")
            raise RuntimeError("killed mid-save")
    assert (target / "weights").read_text() == "good"
    with staged_dir(target) as tmp:  # the next try starts from a clean temp folder
        assert not any(tmp.iterdir())
        (tmp / "weights").write_text("new")
    assert (target / "weights").read_text() == "new"


def test_without_replace_a_directory_that_filled_meanwhile_is_kept(tmp_path):
    """The tiny build: an empty target is taken, one that holds a model by the end is never replaced."""
    empty = tmp_path / "empty"
    empty.mkdir()
    with staged_dir(empty, replace=False) as tmp:
        (tmp / "config.json").write_text("tiny")
    assert (empty / "config.json").read_text() == "tiny"
    target = tmp_path / "model"
    with pytest.raises(OSError):
        with staged_dir(target, replace=False) as tmp:
            (tmp / "config.json").write_text("tiny")
            target.mkdir()
            (target / "config.json").write_text("ppo policy")  # e.g. another process saved a model here
    assert (target / "config.json").read_text() == "ppo policy"
