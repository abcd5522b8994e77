# Two commands are the whole set-up: `make demo` and `make test` (both create .venv first).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# CPU torch where there is no GPU; the CUDA build from PyPI where nvidia-smi answers.
CONSTRAINTS ?= $(if $(shell command -v nvidia-smi 2>/dev/null),constraints/gpu.txt,constraints/cpu.txt)
PARAMS ?= params/tiny-cpu.toml
PYTEST_ARGS ?=

.PHONY: install test demo demo-math demo-code demo-code-endpoint lab clean-demo

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

# The WizardCoder arm offline: the tiny code world, PPO on the execution reward (docs/wizardcoder.md).
demo-code: install
	$(BIN)/rleif run params/tiny-code.toml

# The same preset with every chat-model request (evolution, answers, tests, rankings, step labels) sent to an
# OpenAI-compatible endpoint, played by the code loopback teacher (docs/wizardcoder.md).
demo-code-endpoint: install
	$(BIN)/python -m rleif_kit.testing.demo_code --set 'base.output_dir="./rleif_output/tiny-code-endpoint"' \
		--report-dir reports/tiny-code-endpoint

# JupyterLab, opened on notebooks/ (LAB_ARGS="--no-browser --port 8890" for a remote machine). The server's root
# stays the project root so params/ and the executed reports/ are one click away; preferred_dir only picks the
# folder it opens on. Jupyter starts each kernel in its notebook's folder (notebooks/), and the notebooks' setup()
# then takes the project root as its workdir (core/run_setup.default_workdir), so params/tiny-cpu.toml and the
# run's relative paths resolve as under `rleif run` (checked: the kernel's cwd is notebooks/, setup's workdir the root).
# The notebooks' params_path is empty: setup() runs $(PARAMS), exported to the kernels as RLEIF_PARAMS, so
# `make lab PARAMS=params/tiny-code.toml` opens every notebook on the code arm without editing one.
LAB_ARGS ?=
lab: install
	RLEIF_PARAMS=$(PARAMS) $(BIN)/jupyter lab --FileContentsManager.preferred_dir=notebooks $(LAB_ARGS)

clean-demo:
	rm -rf rleif_output/tiny-cpu reports/tiny-cpu rleif_output/tiny-math reports/tiny-math rleif_output/tiny-code \
		rleif_output/tiny-code-endpoint reports/tiny-code-endpoint \
		reports/tiny-code
