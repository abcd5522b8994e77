"""HumanEval post-processing, pass@k, and the code sandbox against hostile programs.

Runs real subprocesses (no network: the network test only listens on loopback). Tests that need a
protection the machine does not allow (namespaces, a dropped uid) skip and say which.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import tempfile
import time

import pytest

from rleif_kit.sandbox import runner as sandbox
from rleif_kit.evaluation.humaneval import (check_samples, value_program, judging_plan, extract_code, pass_at_k,
                                            pass_at_k_table, score_samples)
from rleif_kit.worlds.code.world import load_problems
from rleif_kit.sandbox.runner import Limits, run_many, run_python, sandbox_plan


@pytest.fixture(scope="module")
def problems():
    return load_problems()


@pytest.fixture(scope="module")
def protections():
    return set(sandbox_plan().protections)


def needs(protections, *names):
    missing = [n for n in names if n not in protections]
    if missing:
        pytest.skip(f"this machine's sandbox lacks {missing}: {sandbox.describe_sandbox()}")


def slot_processes(uid: int) -> list[int]:
    """Pids of live (not zombie) processes running as ``uid``: proof that nothing is left behind."""
    pids = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)] and not fields.get("State", "").strip().startswith("Z"):
            pids.append(int(entry))
    return pids


# ---------------------------------------------------------------- post-processing and pass@k


def test_extract_code_like_wizardcoder():
    response = ("Here is the code:\n```python\ndef add(a, b):\n    return a + b\n\n"
                "if __name__ == \"__main__\":\n    print(add(1, 2))\n```\nDone.")
    assert extract_code(response) == "def add(a, b):\n    return a + b"
    example = "```python\ndef f():\n    return 1\n# Example usage\nprint(f())\n```"
    assert extract_code(example) == "def f():\n    return 1"
    assert extract_code("```python\nx = 1\n```\n```python\ny = 2\n```") == "x = 1"      # the first block
    assert extract_code("    return 1\n") == "    return 1\n"                             # plain code untouched
    assert extract_code("```python\nx = 1\r\n") == "\nx = 1"  # an unclosed block is kept, as published


def test_pass_at_k_hand_values():
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)   # 2/5
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)   # 1 - C(3,2)/C(5,2) = 1 - 3/10
    assert pass_at_k(5, 0, 3) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0
    assert pass_at_k(5, 4, 2) == 1.0                  # n - c < k: every 2-subset has a correct one
    assert pass_at_k(1, 1, 1) == 1.0
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 6)


def test_pass_at_k_table_averages_tasks_and_skips_large_k():
    table = pass_at_k_table({"a": [True, False, False, True, False], "b": [False] * 5}, ks=(1, 2, 10))
    assert table == {"pass@1": pytest.approx((0.4 + 0.0) / 2), "pass@2": pytest.approx((0.7 + 0.0) / 2)}


def test_program_layout(problems):
    """A value-judged program holds the prompt, the completion and the arguments: no test, no expected value."""
    problem = problems["HumanEval/0"]
    cases = judging_plan(problem)
    program = value_program(problem, "    return True\n", cases)
    assert program.startswith(problem["prompt"] + "    return True\n")
    assert "check(" not in program and "assert" not in program and "METADATA" not in program
    assert repr([c.args for c in cases]) in program


# ---------------------------------------------------------------- HumanEval through the sandbox


def test_canonical_solutions_pass_and_wrong_ones_fail(problems):
    ids = list(problems)[:6]
    right = [{"task_id": t, "completion": problems[t]["canonical_solution"]} for t in ids]
    wrong = [{"task_id": t, "completion": "    return None\n"} for t in ids]
    raw = [{"task_id": ids[0], "response": "```python\n" + problems[ids[0]]["prompt"]
            + problems[ids[0]]["canonical_solution"] + "\n# Example usage\nprint(1)\n```"}]
    result = score_samples(right + wrong + raw, problems, workers=2, progress=False)
    rows = result["rows"]
    assert [r["passed"] for r in rows] == [True] * 6 + [False] * 6 + [True]
    assert all(r["result"].startswith("failed:") for r in rows[6:12])
    # task 0 has 3 samples (2 pass), the others 2 (1 pass): pass@1 = (2/3 + 5 * 1/2) / 6
    assert result["n_tasks"] == 6 and result["pass@1"] == pytest.approx((2 / 3 + 5 * 0.5) / 6)


@pytest.mark.parametrize("completion,reason", [
    ("    import sys\n    sys.exit(0)\nimport sys\nsys.exit(0)\n", "exited before the tests finished"),
    ("    import os\n    os._exit(0)\nimport os\nos._exit(0)\n", "exited before the tests finished"),
    ("    while True:\n        pass\n", "timed out after 2s"),
    ("    return [0] * (20 * 2**30 // 8)\n", "failed: case 1 raised MemoryError: "),
])
def test_hostile_completions_fail_with_their_reason(problems, completion, reason):
    row = check_samples([{"task_id": "HumanEval/0", "completion": completion}], problems, timeout=2, progress=False)[0]
    assert row["passed"] is False
    assert row["result"] == reason


@pytest.mark.slow
def test_all_164_canonical_solutions_pass_and_wrong_ones_fail(problems):
    start = time.monotonic()
    right = score_samples([{"task_id": t, "completion": p["canonical_solution"]} for t, p in problems.items()],
                          problems, workers=2, progress=False)
    assert right["n_tasks"] == 164 and right["pass@1"] == 1.0, [r for r in right["rows"] if not r["passed"]][:3]
    wrong = score_samples([{"task_id": t, "completion": "    raise NotImplementedError\n"} for t in problems],
                          problems, workers=2, progress=False)
    assert wrong["pass@1"] == 0.0
    assert time.monotonic() - start < 120


# ---------------------------------------------------------------- the sandbox itself


def test_plan_reports_its_protections(protections):
    assert {"process-group", "temp-dir", "timeout", "rlimits"} <= protections
    assert sandbox.describe_sandbox().startswith("sandbox protections: ")


def test_a_program_runs_and_reports(protections):
    result = run_python("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nsys.exit(3)")
    assert (result.returncode, result.stdout.strip(), result.stderr.strip()) == (3, "hello", "oops")
    assert not result.timed_out and result.error is None and set(result.protections) == protections


def test_infinite_loop_times_out_and_its_group_is_killed(protections):
    program = ("import os, time\n"
               "if os.fork() == 0:\n"
               "    os.setsid()\n"                  # a child that leaves the process group
               "    time.sleep(60)\n"
               "signal = __import__('signal'); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
               "while True:\n    pass\n")
    start = time.monotonic()
    result = run_python(program, timeout=1.5)
    assert result.timed_out and result.returncode is None
    assert time.monotonic() - start < 6
    if "unprivileged-uid" in protections:
        assert slot_processes(sandbox._slot_uid(0)) == []


def test_fork_bomb_is_contained(protections):
    start = time.monotonic()
    result = run_python("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
                        timeout=2)
    assert result.timed_out
    assert time.monotonic() - start < 8
    if "unprivileged-uid" in protections:
        time.sleep(0.2)
        assert slot_processes(sandbox._slot_uid(0)) == []


def test_process_limit_binds(protections):
    needs(protections, "unprivileged-uid")
    program = ("import os, time\nn = 0\ntry:\n    for _ in range(100):\n        if os.fork() == 0:\n"
               "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\n"
               "print(n, flush=True)\nos._exit(0)\n")
    result = run_python(program, timeout=10, limits=Limits(nproc=8))
    assert result.returncode == 0 and int(result.stdout.strip()) < 8


def test_huge_allocation_and_big_file_are_stopped():
    memory = run_python("x = bytearray(20 * 2**30)\nprint('allocated')")
    assert memory.returncode != 0 and "allocated" not in memory.stdout and "MemoryError" in memory.stderr
    big = run_python("open('big.bin', 'wb').write(b'x' * (64 << 20))\nprint('written')",
                     limits=Limits(file_bytes=1 << 20))
    assert big.returncode != 0 and "written" not in big.stdout and "File too large" in big.stderr


def test_cpu_time_limit_kills_a_busy_program():
    result = run_python("while True:\n    pass\n", timeout=30, limits=Limits(cpu_seconds=1))
    assert not result.timed_out and result.returncode in (-signal.SIGXCPU, -signal.SIGKILL)
    assert result.wall_s < 10


@pytest.fixture
def sentinels():
    """A world-traversable dir outside any sandbox with a read-only and a world-writable sentinel."""
    folder = tempfile.mkdtemp(prefix="rleif-sentinel-")
    os.chmod(folder, 0o755)
    kept = os.path.join(folder, "keep.txt")
    with open(kept, "w") as f:
        f.write("keep")
    os.chmod(kept, 0o644)
    open_dir = os.path.join(folder, "open")
    os.mkdir(open_dir)
    os.chmod(open_dir, 0o777 | stat.S_ISVTX)
    yield folder, kept, open_dir
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def test_cannot_write_or_delete_outside_the_temp_dir(protections, sentinels):
    needs(protections, "unprivileged-uid")
    folder, kept, _ = sentinels
    attacks = [f"open({kept!r}, 'w').write('gone')", f"import os; os.remove({kept!r})",
               f"import shutil; shutil.rmtree({folder!r})", f"open({folder + '/new.txt'!r}, 'w').write('x')",
               "open('inside.txt', 'w').write('fine'); print(open('inside.txt').read())"]
    results = [run_python(a) for a in attacks]
    assert [r.returncode != 0 for r in results] == [True, True, True, True, False]
    assert results[-1].stdout.strip() == "fine"
    assert open(kept).read() == "keep" and sorted(os.listdir(folder)) == ["keep.txt", "open"]


def test_read_only_filesystem_even_where_permissions_allow(protections, sentinels):
    needs(protections, "read-only-filesystem")
    _, _, open_dir = sentinels
    result = run_python(f"open({open_dir + '/x.txt'!r}, 'w').write('x')")
    # with a minimal root the host's folder is not even there; without one it is read only
    assert result.returncode != 0 and ("Read-only file system" in result.stderr or
                                       "No such file or directory" in result.stderr), result.stderr
    assert os.listdir(open_dir) == []


def test_the_program_sees_the_interpreter_and_nothing_else_of_the_host(protections):
    """Issue 17: any world-readable host file could be read and copied into the result, the evaluator's
    site-packages (and the datasets in it) included. The minimal root shows the interpreter, the standard
    library and the shared libraries; every site-packages is an empty folder."""
    needs(protections, "minimal-root")
    import site

    import rleif_kit

    probe = ("import os, sys, json\n"
             "paths = " + repr(["/etc/passwd", "/etc/hostname", rleif_kit.__file__, *site.getsitepackages(),
                                os.getcwd()]) + "\n"
             "seen = {p: os.path.exists(p) and (not os.path.isdir(p) or bool(os.listdir(p))) for p in paths}\n"
             "seen['/etc beyond the loader cache'] = os.path.isdir('/etc') and sorted(os.listdir('/etc')) != ['ld.so.cache']\n"
             "print(json.dumps(seen))\n"
             "import collections, decimal, fractions, hashlib, json, re, sqlite3, ssl\n")
    result = run_python(probe)
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout)
    assert not any(seen.values()), {p: v for p, v in seen.items() if v}


def test_the_temp_dir_has_a_size_cap(protections):
    """Issue 17: one program wrote 2.3 GiB into its temp dir in 7 s (RAM, where /tmp is a tmpfs)."""
    needs(protections, "tmp-quota")
    result = run_python("for i in range(40):\n    open(f'f{i}', 'wb').write(b'x' * (15 << 20))\n",
                        limits=Limits(tmp_bytes=32 << 20))
    assert result.returncode != 0 and "No space left on device" in result.stderr, result.stderr[-300:]


def test_network_is_unreachable(protections):
    needs(protections, "network-namespace")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        program = (f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                   "    print('connected')\nexcept OSError as e:\n    print('blocked', e.errno)\n")
        assert run_python(program).stdout.strip().startswith("blocked")
        outside = run_python("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=2)")
        assert outside.returncode != 0 and "unreachable" in outside.stderr
    finally:
        server.close()


def test_the_evaluator_survives_kill_attempts(protections):
    needs(protections, "unprivileged-uid")  # without it a kill of our pid could succeed
    me = os.getpid()
    for program in (f"import os, signal\nos.kill({me}, signal.SIGKILL)",
                    "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)"):
        run_python(program)
    os.kill(me, 0)  # still here (the test process would be gone otherwise)


def test_parallel_runs_keep_order_and_use_separate_slots(protections):
    results = run_many([f"import os\nprint({i}, os.getuid())" for i in range(6)], workers=3)
    assert [int(r.stdout.split()[0]) for r in results] == list(range(6))
    if "unprivileged-uid" in protections:
        assert {int(r.stdout.split()[1]) for r in results} <= {sandbox._slot_uid(i) for i in range(3)}


def test_weakest_plan_still_bounds_time():
    plan = sandbox.SandboxPlan(namespaces=False, drop_uid=False)
    ok = sandbox._run(plan, "print('ok')", timeout=10, limits=Limits(), slot=0)
    assert ok.returncode == 0 and ok.stdout.strip() == "ok"
    assert "network-namespace" not in ok.protections and "rlimits" in ok.protections
    loop = sandbox._run(plan, "while True:\n    pass\n", timeout=1, limits=Limits(), slot=0)
    assert loop.timed_out


def test_the_program_inherits_only_stdio():
    result = run_python("import os\nprint(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))")
    if result.returncode != 0:
        pytest.skip("no /proc on this machine")
    assert set(eval(result.stdout)) <= {0, 1, 2, 3}  # 3: the directory being listed


@pytest.mark.parametrize("plan", [None, sandbox.SandboxPlan(namespaces=False, drop_uid=False)],
                         ids=["this machine's plan", "the weakest plan"])
def test_only_the_harness_reporter_is_counted_and_the_token_is_nowhere_the_program_looks(plan, monkeypatch):
    """Issue 42: the program wrote the verdict file itself. Now the evaluator reads a file of its own, and counts it
    only when signed with a token that is not in the program's text, argv, environment or files."""
    plan = plan or sandbox_plan()
    token = b"T" * 32
    monkeypatch.setattr(sandbox.secrets, "token_bytes", lambda n: token)
    reported = sandbox._run(plan, "__rleif_report([{'value': 3}])\n", timeout=10, limits=Limits(), slot=0)
    assert reported.returncode == 0 and reported.result == b'[{"value": 3}]' and not reported.forged
    looks = ("import os\ntry:\n    argv = open('/proc/self/cmdline', 'rb').read()\nexcept OSError:\n    argv = None\n"
             "print(argv, dict(os.environ), [open(n, 'rb').read() for n in os.listdir('.') if os.path.isfile(n)])\n"
             "open('result.json', 'w').write('[{\"value\": 3}]')\n"
             "for fd in range(3, 256):\n    try:\n        os.write(fd, b'0' * 64 + b'\\n[{\"value\": 3}]')\n"
             "    except OSError:\n        pass\n__rleif_report\n")
    blind = sandbox._run(plan, looks, timeout=10, limits=Limits(), slot=0)
    assert blind.returncode == 0 and blind.stdout and token.decode() not in blind.stdout, blind.stderr[-300:]
    assert blind.result is None and blind.forged  # the fd it found holds its frame: unsigned, never counted
