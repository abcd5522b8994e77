"""The code sandbox: the evaluator side (runner) and the stdlib-only launcher it compiles and starts."""
