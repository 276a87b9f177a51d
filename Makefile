# Attention, step by step: every command a learner or an instructor needs.
# `make help` lists them.

PYTHON   ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.course-installed
LAB_ARGS ?=
LESSON   ?=
MODULES  ?= course/*.py course/check/*.py
# Jupyter refuses to run as root unless told; containers often run as root.
ROOT_ARG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

.DEFAULT_GOAL := help
.PHONY: help install lab test test-fast notebooks lint train mutation clean clean-venv

help: ## List every target with one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  Variables: LAB_ARGS='--no-browser --port=8899' (lab), LESSON=02 (notebooks),"
	@echo "             MODULES=course/rnn.py (mutation)"

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info; sys.exit(0 if v >= (3, 10) else "Python 3.10+ is needed, found %d.%d: set PYTHON=python3.11" % v[:2])'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	$(BIN)/python -m pip install --quiet --no-deps -e .
	@touch $@
	@echo "Installed the course into $(VENV)."

install: $(STAMP) ## Create .venv and install the pinned requirements and `course` (done by lab/test too)

lab: $(STAMP) ## Start JupyterLab on the course (extra options: LAB_ARGS="--no-browser --port=8899")
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks $(ROOT_ARG) $(LAB_ARGS)

test: $(STAMP) ## Unit and pipeline tests, then nbval over every notebook in notebooks/ and solutions/
	$(BIN)/python -m pytest

test-fast: $(STAMP) ## Only the Python tests (no notebooks): quick feedback while editing `course`
	$(BIN)/python -m pytest tests -p no:nbval -o addopts="" -q

notebooks: $(STAMP) ## Regenerate learner + solution notebooks from solutions/NN_*.py (one lesson: LESSON=02)
	$(BIN)/python -m course.authoring build $(LESSON)

lint: $(STAMP) ## ruff on the package, tests, lesson sources and notebooks
	$(BIN)/ruff check course tests solutions notebooks
	$(BIN)/ruff format --check course tests

train: $(STAMP) ## Train the Transformer on lesson 09's task, print its held-out scores (~1 min on 2 cores)
	$(BIN)/python -m course.train --task toy-translation

mutation: $(STAMP) ## Mutation score of `course` by tools/mutation.py (slow: minutes per module)
	$(BIN)/python tools/mutation.py $(MODULES)

clean: ## Remove caches and build leftovers (never notebooks or your work; keeps .venv)
	rm -rf .pytest_cache .ruff_cache build *.egg-info
	find course tests -name __pycache__ -type d -prune -exec rm -rf {} +

clean-venv: ## Remove .venv too (the next make test/lab reinstalls it)
	rm -rf $(VENV)
