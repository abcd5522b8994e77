"""Issue 30, found by attack: the evaluator itself must not be exhausted by what a program returns, nor the host by
what a program makes in its temp dir.

- A value crosses back as plain data and is rebuilt in the evaluator (``value_tests.from_plain``): a lazily huge
  one (``range(10**9)``: 20 bytes of JSON) was materialised by the trusted test's own ``tuple(...)`` in the
  evaluator's process (2.5 GiB in 2 s). Now what is rebuilt is bounded (values, range lengths, nesting, keys that
  flood one hash), and the trusted test runs in a child of the evaluator with its own memory and time limits.
- The temp dir's tmpfs had no inode cap (900k empty files in 6 s: 0.9 GiB of the host kernel's memory).

Runs real sandboxed programs (no network). Each case asserts a failed verdict with its reason, that the call
returned quickly, and that the evaluator's peak memory did not grow.
"""

from __future__ import annotations

import resource
import time

import pytest

from rleif_kit.evaluation.humaneval import check_samples, judging_plan
from rleif_kit.sandbox import session
from rleif_kit.sandbox.runner import Limits, run_python, sandbox_plan
from rleif_kit.worlds.code.value_tests import check_hashes, from_plain, to_plain

P = 2**61 - 1  # i * P hashes to 0 for every int i: a set of them is built in quadratic time


def problem(test: str) -> dict:
    return {"task_id": "bounds/0", "prompt": 'def f():\n    """The answer."""\n', "entry_point": "f", "test": test,
            "canonical_solution": "    return [0, 1, 2]\n"}


# the test-judged shape (a loop: not a list of literal asserts) that materialises what it gets, as HumanEval/33's
# ``tuple(candidate([1, 2, 3]))`` does
SERVED = problem("def check(candidate):\n    for _ in range(1):\n        assert tuple(candidate()) == (0, 1, 2)\n")
VALUED = problem("def check(candidate):\n    assert candidate() == [0, 1, 2]\n")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def verdict(task: dict, completion: str, timeout: float = 5.0) -> tuple[dict, float, float]:
    """(row, seconds, MiB the evaluator's peak memory grew by)."""
    before, start = peak_mib(), time.monotonic()
    row = check_samples([{"task_id": task["task_id"], "completion": completion}], {task["task_id"]: task},
                        timeout=timeout, progress=False)[0]
    return row, time.monotonic() - start, peak_mib() - before


def forged_reply(value: str) -> str:
    """A completion that answers the evaluator's call itself with the plain encoding ``value`` (Python source)."""
    return ("    import json, os\n"
            f"    os.write(1, b'\\x1e' + json.dumps({{'value': {value}}}).encode() + b'\\n')\n"
            "    return [0, 1, 2]\n")


def forged_result(value: str) -> str:
    """A completion whose module code reports the plain encoding ``value`` through the harness's own reporter
    itself (issue 42: a result file it writes no longer counts), then exits."""
    return ("    return [0, 1, 2]\nimport os\n"
            f"__rleif_report([{{'value': {value}}}])\nos._exit(0)\n")


COLLIDING = "[i * (2**61 - 1) for i in range(100_000)]"
NESTED = "__import__('functools').reduce(lambda x, _: {'list': [x]}, range(150), 0)"


def test_the_shapes_are_judged_as_meant():
    assert judging_plan(SERVED) is None and judging_plan(VALUED) is not None
    for task in (SERVED, VALUED):
        row, _, _ = verdict(task, task["canonical_solution"])
        assert row["passed"] is True, row["result"]


TOO_LARGE = "too large to rebuild"
RETURNED = {  # what the candidate returns -> what the reason says
    "range(10**9)": ("    return range(10**9)\n", TOO_LARGE),
    "range(10**30) (longer than sys.maxsize)": ("    return range(10**30)\n", TOO_LARGE),
    "a generator of 10**9 items": ("    return (i for i in range(10**9))\n", "iterator longer than 100,000"),
    "nested 150 deep": ("    x = []\n    for _ in range(150):\n        x = [x]\n    return x\n", "deeper than 100"),
    "a 20 MiB string": ("    return 'x' * (20 << 20)\n", "longer than 16 MiB"),
    "an int of 5000 digits": ("    return 10**5000\n", "4300 digits"),
    "a forged range(10**12)": (forged_reply("{'range': [0, 10**12, 1]}"), TOO_LARGE),
    "a forged list of 1.5 million values": (forged_reply("{'list': [0] * 1_500_000}"), "more than 1,000,000 values"),
    "a forged set of colliding ints": (forged_reply(f"{{'set': {COLLIDING}}}"), "of one hash"),
    "a forged dict of colliding keys": (forged_reply(f"{{'dict': [[k, 0] for k in {COLLIDING}]}}"), "of one hash"),
    "a forged nesting 150 deep": (forged_reply(NESTED), "deeper than 100"),
}


@pytest.mark.parametrize("name", sorted(RETURNED))
def test_a_huge_return_value_fails_the_test_judged_path_with_its_reason(name):
    completion, reason = RETURNED[name]
    row, seconds, grew = verdict(SERVED, completion)
    assert row["passed"] is False and row["judged"].startswith("test") and reason in row["result"], row["result"]
    assert seconds < 5 and grew < 100, (seconds, grew)  # before: 2.5 GiB in 2 s, until a watchdog stopped it


FORGED = {  # the result file the program writes itself -> what the reason says
    "range(10**9)": ("{'range': [0, 10**9, 1]}", TOO_LARGE),
    "range(10**30)": ("{'range': [0, 10**30, 1]}", TOO_LARGE),
    "1.5 million values": ("{'list': [0] * 1_500_000}", "more than 1,000,000 values"),
    "a set of colliding ints": (f"{{'set': {COLLIDING}}}", "of one hash"),
    "a Counter of colliding keys": (f"{{'Counter': [[k, 1] for k in {COLLIDING}]}}", "of one hash"),
    "nested 150 deep": (NESTED, "deeper than 100"),
}


@pytest.mark.parametrize("name", sorted(FORGED))
def test_a_huge_value_fails_the_value_judged_path_with_its_reason(name):
    value, reason = FORGED[name]
    row, seconds, grew = verdict(VALUED, forged_result(value))
    assert row["passed"] is False and row["judged"].startswith("value") and reason in row["result"], row["result"]
    assert seconds < 5 and grew < 100, (seconds, grew)


def test_the_lazily_huge_values_still_fail_on_the_value_path():
    for completion in ("    return range(10**9)\n", "    return (i for i in range(10**9))\n"):
        row, seconds, _ = verdict(VALUED, completion)
        assert row["passed"] is False and seconds < 5, row["result"]


def test_the_trusted_test_runs_under_its_own_memory_limit():
    """A small answer the test itself grows: ``[0] * 10**9`` is 8 GB; the test's child gets 1 GiB."""
    task = problem("def check(candidate):\n    for _ in range(1):\n        assert len([0] * candidate()) == 3\n")
    row, seconds, grew = verdict(task, "    return 10**9\n")
    assert row["passed"] is False and "memory limit" in row["result"], row["result"]
    assert seconds < 5 and grew < 100
    assert verdict(task, "    return 3\n")[0]["passed"] is True


def test_the_trusted_test_runs_under_its_own_time_limit():
    """A test that loops as long as the answer says, never calling the candidate again: killed at the deadline."""
    task = problem("def check(candidate):\n    n = candidate()\n    while n:\n        n -= 1\n")
    row, seconds, _ = verdict(task, "    return 10**15\n", timeout=2)
    assert row["passed"] is False and row["result"] == "timed out after 2s"
    assert seconds < 5


def test_a_flood_of_colliding_items_in_the_test_is_cut_at_the_deadline():
    task = problem("def check(candidate):\n    for _ in range(1):\n        assert len(set(candidate())) == 1\n")
    row, seconds, _ = verdict(task, forged_reply(f"{{'list': {COLLIDING}}}"), timeout=2)
    assert row["passed"] is False and row["result"] == "timed out after 2s" and seconds < 5


def test_the_outcome_of_the_test_crosses_back_faithfully():
    """What the talk returned or raised comes back from the child, a class the test defined itself by name."""
    source = "import sys\nfor line in sys.stdin:\n    print('\\x1e{\"value\": 7}', flush=True)\n"
    _, value = session.run_session(source, lambda call: call({})["value"] * 6)
    assert value == 42

    class Mine(Exception):  # local: it cannot be pickled as itself, so it comes back by name
        pass

    for raised, kind in ((AssertionError("no"), AssertionError), (Mine("mine"), None)):
        def talk(call, raised=raised):
            call({})
            raise raised

        _, outcome = session.run_session(source, talk)
        assert type(outcome).__name__ == type(raised).__name__ and str(outcome) == str(raised)
        assert kind is None or type(outcome) is kind


def test_from_plain_bounds_and_round_trips():
    for value in ([0, 1.5, "x", None, True], {"a": (1, 2)}, {1, 2, 3}, range(0, 1000, 3), [[[[]]]]):
        assert from_plain(to_plain(value)) == value
    assert from_plain({"range": [0, 10**6 - 1, 1]}) == range(10**6 - 1)  # 1 + 999,999 = 1,000,000 values
    with pytest.raises(ValueError, match=TOO_LARGE):
        from_plain({"list": [{"range": [0, 600_000, 1]}] * 2})  # 600,000 + 600,000: the budget is shared
    with pytest.raises(ValueError, match="of one hash"):
        from_plain({"frozenset": [i * P for i in range(9)]})  # 9 keys of hash 0
    assert from_plain({"set": [i * P for i in range(8)]}) == {i * P for i in range(8)}
    check_hashes([1] * 10**5)  # equal items are no flood
    with pytest.raises(ValueError, match="of one hash"):
        check_hashes([(i * P,) for i in range(9)])  # tuples of colliding ints collide too


# ------------------------------------------------------------------------------------------ the temp dir


def test_the_temp_dir_caps_its_files():
    """Issue 30: one program made 900k empty files in 6 s (no bytes, 0.9 GiB of the host kernel's memory)."""
    if "tmp-quota" not in sandbox_plan().protections:
        pytest.skip("no tmpfs of its own for the temp dir here (no namespaces)")
    flood = ("import os\nn = 0\ntry:\n    while True:\n        open(f'f{n}', 'w').close()\n        n += 1\n"
             "except OSError as e:\n    print(n, e.errno, len(os.listdir('.')), flush=True)\n"
             "try:\n    os.link('f0', 'one-more')\nexcept OSError as e:\n    print(e.errno)\n")
    result = run_python(flood, timeout=20, limits=Limits(tmp_inodes=512))
    made, errno, listed, link_errno = map(int, result.stdout.split())
    assert (errno, link_errno) == (28, 28) and made < 512 and listed <= 512  # ENOSPC; program.py is one of them
    assert result.wall_s < 5


def test_a_thread_flood_is_capped_by_the_process_limit():
    if "unprivileged-uid" not in sandbox_plan().protections:
        pytest.skip("without a uid of its own the process limit counts the evaluator's user too")
    flood = ("import os, threading, time\nn = 0\ntry:\n    for _ in range(500):\n"
             "        threading.Thread(target=time.sleep, args=(5,), daemon=True).start()\n        n += 1\n"
             "except RuntimeError:\n    pass\nprint(n, flush=True)\nos._exit(0)\n")
    result = run_python(flood, timeout=10, limits=Limits(nproc=8))
    assert result.returncode == 0 and int(result.stdout) < 8  # 7 threads and the main one


def test_without_a_uid_of_its_own_the_program_cannot_remount_its_caps_away():
    """Where the uid is not dropped (a non-root evaluator: a user namespace; or root's fallback), the program held
    every capability of its namespace and remounted its tmpfs without the caps, and its root read-write."""
    from rleif_kit.sandbox import runner

    if "minimal-root" not in sandbox_plan().protections:
        pytest.skip("no namespaces here")
    remounts = "((os.getcwd(), 32 | 4 | 2, b'size=1g,nr_inodes=1000000'), ('/', 32 | 4096, None))"  # tmpfs; root rw
    attack = ("import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
              f"for target, flags, data in {remounts}:\n"
              "    print(libc.mount(None, target.encode(), None, ctypes.c_ulong(flags), data), ctypes.get_errno())\n"
              "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n")
    result = runner._run(runner.SandboxPlan(namespaces=True, drop_uid=False), attack, 10, Limits(), slot=0)
    assert result.returncode == 0, result.stderr[-300:]
    assert result.stdout.split() == ["-1", "1", "-1", "1", "0000000000000000"]  # EPERM twice, no capability
    assert "no-capabilities" in result.protections
