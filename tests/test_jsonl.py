"""Crash-safe JSONL: round trip, torn tails, corruption, fsync cadence, and real SIGKILLs.

On-disk under pytest's tmp dirs only; the kill test runs a writer in a subprocess.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from rleif_kit.core import jsonl
from rleif_kit.core.jsonl import JsonlWriter, read_ids, read_jsonl, repair_torn_tail, write_jsonl


def test_round_trip_keeps_unicode_and_order(tmp_path):
    path = tmp_path / "sub" / "out.jsonl"  # the parent directory is created
    records = [{"id": str(i), "text": f"x² + {i} = ü", "n": i} for i in range(5)]
    with JsonlWriter(path) as out:
        for record in records:
            out.write(record)
    assert list(read_jsonl(path)) == records
    assert "x² + 0 = ü" in path.read_text(encoding="utf-8")  # ensure_ascii=False
    assert read_ids(path) == {"0", "1", "2", "3", "4"}
    with JsonlWriter(path) as out:  # appends, never truncates
        out.write({"id": "5"})
    assert [r["id"] for r in read_jsonl(path)] == ["0", "1", "2", "3", "4", "5"]


def test_missing_file_reads_as_empty(tmp_path):
    assert list(read_jsonl(tmp_path / "nope.jsonl")) == []
    assert read_ids(tmp_path / "nope.jsonl") == set()
    assert repair_torn_tail(tmp_path / "nope.jsonl") is False


def test_torn_tail_is_skipped_by_reader_and_cut_by_writer(tmp_path):
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [{"id": "a"}, {"id": "b"}])
    with open(path, "ab") as f:
        f.write(b'{"id": "c", "text": "half a li')  # a write cut short by a crash
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]
    assert read_ids(path) == {"a", "b"}  # so a resumed run redoes "c"
    with JsonlWriter(path) as out:
        assert out.repaired
        out.write({"id": "c"})
    assert path.read_text().splitlines() == ['{"id": "a"}', '{"id": "b"}', '{"id": "c"}']


def test_torn_multibyte_character_and_invalid_last_line_with_newline(tmp_path):
    path = tmp_path / "out.jsonl"
    write_jsonl(path, [{"id": "a"}])
    with open(path, "ab") as f:
        f.write('{"id": "b", "t": "ü'.encode()[:-1])  # cut inside a UTF-8 sequence
    assert [r["id"] for r in read_jsonl(path)] == ["a"]
    assert repair_torn_tail(path) is True and path.read_bytes() == b'{"id": "a"}\n'
    with open(path, "ab") as f:
        f.write(b"\0\0\0\0\n")  # zero-filled block after a power loss
    assert [r["id"] for r in read_jsonl(path)] == ["a"]
    assert repair_torn_tail(path) is True and path.read_bytes() == b'{"id": "a"}\n'
    assert repair_torn_tail(path) is False  # a healthy file is left alone


def test_complete_last_record_without_newline_is_kept(tmp_path):
    # A prefix of a JSON object is never valid JSON, so a parsable last line is the whole record.
    path = tmp_path / "out.jsonl"
    path.write_bytes(b'{"id": "a"}\n{"id": "b"}')
    assert read_ids(path) == {"a", "b"}
    with JsonlWriter(path) as out:
        out.write({"id": "c"})
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b", "c"]


def test_corrupt_middle_line_names_file_and_line(tmp_path):
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": "a"}\n{"id": "b", oops}\n{"id": "c"}\n')
    with pytest.raises(ValueError, match=r"out\.jsonl:2: invalid JSON"):
        list(read_jsonl(path))
    path.write_text('{"id": "a"}\n[1, 2]\n{"id": "c"}\n')
    with pytest.raises(ValueError, match=r"out\.jsonl:2: not a JSON object"):
        list(read_jsonl(path))


def test_long_last_line_is_found_across_read_chunks(tmp_path):
    path = tmp_path / "out.jsonl"
    big = "y" * (3 * jsonl._CHUNK)
    write_jsonl(path, [{"id": "a", "t": big}, {"id": "b", "t": big}])
    with open(path, "ab") as f:
        f.write(json.dumps({"id": "c", "t": big}).encode()[: 2 * jsonl._CHUNK])
    assert repair_torn_tail(path) is True
    assert [r["id"] for r in read_jsonl(path)] == ["a", "b"]


def test_fsync_every_n_records_and_on_close(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd)))
    path = tmp_path / "out.jsonl"
    with JsonlWriter(path, fsync_every=500) as out:
        calls.clear()  # creating the file fsyncs its directory once
        for i in range(1200):
            out.write({"id": str(i)})
        assert len(calls) == 2  # after records 500 and 1000
    assert len(calls) == 3  # + close: 1200 // 500 + 1
    with pytest.raises(ValueError, match="closed"):
        out.write({"id": "late"})
    with pytest.raises(ValueError, match="fsync_every"):
        JsonlWriter(path, fsync_every=0)


def test_write_jsonl_replaces_atomically(tmp_path):
    path = tmp_path / "derived.jsonl"
    write_jsonl(path, [{"id": "old"}])
    with pytest.raises(RuntimeError):
        write_jsonl(path, _explode_after([{"id": "new"}]))
    assert read_ids(path) == {"old"}  # the failed rewrite left the old file whole
    assert [p.name for p in tmp_path.iterdir()] == ["derived.jsonl"]  # and no temp file
    write_jsonl(path, [{"id": "new"}])
    assert read_ids(path) == {"new"}


def _explode_after(records):
    yield from records
    raise RuntimeError("boom")


WRITER_SCRIPT = """
import sys
from rleif_kit.core.jsonl import JsonlWriter, read_ids
path = sys.argv[1]
start = len(read_ids(path))
with JsonlWriter(path, fsync_every=50) as out:
    i = start
    while True:
        out.write({"id": str(i), "payload": "z" * (i % 5000), "text": "zürich " * 20})
        i += 1
"""


def test_sigkill_at_random_moments_never_leaves_a_partial_or_duplicate_record(tmp_path):
    path = tmp_path / "killed.jsonl"
    rng = random.Random(7)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for _ in range(5):
        proc = subprocess.Popen([sys.executable, "-c", WRITER_SCRIPT, str(path)], env=env)
        before = path.stat().st_size if path.exists() else 0
        deadline = time.monotonic() + 30
        while (path.stat().st_size if path.exists() else 0) <= before and time.monotonic() < deadline:
            time.sleep(0.005)  # wait until this writer is really writing
        time.sleep(rng.uniform(0.0, 0.05))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ids = [r["id"] for r in read_jsonl(path)]
        assert ids == [str(i) for i in range(len(ids))]  # no gap, no duplicate, no partial record
        assert len(ids) > 0
    with JsonlWriter(path) as out:
        out.write({"id": "after"})
    ids = [r["id"] for r in read_jsonl(path)]
    assert ids[-1] == "after" and len(ids) == len(set(ids))
    assert path.read_bytes().endswith(b'{"id": "after"}\n')
