# Two commands are the whole set-up: `make demo` and `make test` (both create .venv first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU torch where there is no GPU; the CUDA build from PyPI where nvidia-smi answers.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),constraints/gpu.txt,constraints/cpu.txt)
PARAMS ?= params/tiny-cpu.toml
PYTEST_ARGS ?=

.PHONY: install test demo demo-math clean-demo

$(VENV)/.installed: pyproject.toml constraints/cpu.txt constraints/gpu.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e ".[test]"
	touch $@

install: $(VENV)/.installed

test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

demo: install
	$(BIN)/rleif run $(PARAMS)

# The real path offline: GSM8k/MATH-format files and an OpenAI-compatible endpoint played by the loopback teacher.
demo-math: install
	$(BIN)/python -m rleif_kit.testing.demo_math

clean-demo:
	rm -rf rleif_output/tiny-cpu reports/tiny-cpu rleif_output/tiny-math reports/tiny-math
