# Attention, step by step: every command a learner or an instructor needs.
# `make help` lists them.

PYTHON   ?= python3
VENV     ?= .venv
BIN      := $(VENV)/bin
STAMP    := $(VENV)/.course-installed
LAB_ARGS ?=
LESSON   ?=
MODULES  ?= course/*.py course/check/*.py
PROGRESS_ARGS ?=
TRAIN_ARGS ?=
BENCH_ARGS ?=
TIMINGS_ARGS ?=
# Jupyter refuses to run as root unless told; containers often run as root.
ROOT_ARG := $(if $(filter 0,$(shell id -u 2>/dev/null)),--allow-root)

.DEFAULT_GOAL := help
.PHONY: help install lab test test-portable test-fast notebooks translations lint site train bench timings progress mutation clean clean-venv

help: ## List every target with one line each
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  make %-13s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  Variables: TORCH=cpu or TORCH=cuda (install: that torch build; unset: the CPU build on Linux"
	@echo "             without an NVIDIA GPU, see make torch-index),"
	@echo "             PYTHON=python3.12 (install), JOBS=2 (test, test-portable),"
	@echo "             LAB_ARGS='--no-browser --port=8899' (lab), LESSON=02 (notebooks),"
	@echo "             MODULES=course/rnn.py (mutation), LESSON=01 PRUNE=1 (translations),"
	@echo "             PROGRESS_ARGS='submissions/ --csv grades.csv' (progress),"
	@echo "             TRAIN_ARGS='--device cuda --compile' (train), BENCH_ARGS='--device cuda --bf16' (bench),"
	@echo "             TIMINGS_ARGS='--only site,train' (timings)"

# The Pythons whose wheels every pin has (tools/check_pins.py checks; pyproject and README agree).
PY_MIN := 3.10
PY_MAX := 3.14
INSTALL_HINT := Check your Python version ($(PY_MIN) to $(PY_MAX) are supported) and network, then run \`make install\` again.
# $(call pip_install,ARGS,WHAT): pip install ARGS into $(VENV); if pip fails, one line after its
# own output says what failed and what to try. $(call pip_command,...) is the same without the @,
# to end a longer shell line.
pip_command = echo "$(BIN)/python -m pip install --quiet $(1)"; \
	$(BIN)/python -m pip install --quiet $(1) || { echo "$(2) failed (see pip's message above). $(INSTALL_HINT)" >&2; exit 1; }
pip_install = @$(call pip_command,$(1),$(2))
# Which torch (tools/torch_index.py decides, says why in one line, prints pip's extra index or
# nothing): on Linux without an NVIDIA GPU (`nvidia-smi -L` lists none), the CPU build from
# TORCH_CPU_INDEX, if it answers within 5 s; TORCH=cpu or TORCH=cuda chooses either; the
# learner's own PIP_EXTRA_INDEX_URL / PIP_INDEX_URL are left alone. `make torch-index` shows it.
TORCH ?=
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
# $(call torch_index,PYTHON): the command that prints the extra index (or nothing).
torch_index = $(1) tools/torch_index.py --torch "$(TORCH)" --index "$(TORCH_CPU_INDEX)"

$(STAMP): requirements.txt pyproject.toml
	@py=$(BIN)/python; test -x $$py || py=$(PYTHON); \
	command -v $$py >/dev/null || { echo "No $(PYTHON) found. The course installs on Python $(PY_MIN) to $(PY_MAX): name one with \`make install PYTHON=python3.12\`." >&2; exit 1; }; \
	$$py -c 'import sys; lo, hi = (tuple(map(int, v.split("."))) for v in ("$(PY_MIN)", "$(PY_MAX)")); sys.exit(not lo <= sys.version_info[:2] <= hi)' || { \
	  v=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])'); \
	  if [ $$py = $(BIN)/python ]; then echo "$(VENV) was made with Python $$v, which the course does not support: it installs on Python $(PY_MIN) to $(PY_MAX). Run \`make clean-venv\`, then \`make install PYTHON=python3.12\` (or another of those)." >&2; \
	  else echo "Python $$v ($$py) is not supported: the course installs on Python $(PY_MIN) to $(PY_MAX). Choose one with \`make install PYTHON=python3.12\` (or another of those)." >&2; fi; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV) || { echo "Creating $(VENV) with $(PYTHON) failed (see the message above). On Debian/Ubuntu install the venv module (sudo apt install python3-venv), run \`make clean-venv\`, then \`make install\` again." >&2; exit 1; }
	$(call pip_install,--upgrade pip,Upgrading pip in $(VENV))
	@idx=$$($(call torch_index,$(BIN)/python)) || exit 1; \
	$(call pip_command,-r requirements.txt$${idx:+ --extra-index-url $$idx},Installing the requirements into $(VENV))
	$(call pip_install,--no-deps -e .,Installing the course package into $(VENV))
	@touch $@
	@echo "Installed the course into $(VENV)."

install: $(STAMP) ## Create .venv and install the pinned requirements and `course` (done by lab/test too)

.PHONY: torch-index
torch-index: ## Print which torch build `make install` would install here, and why (installs nothing)
	@py=$(BIN)/python; test -x $$py || py=$(PYTHON); \
	idx=$$($(call torch_index,$$py)) || exit 1; echo "pip's extra index for torch: $${idx:-none}"

lab: $(STAMP) ## Start JupyterLab on the course (extra options: LAB_ARGS="--no-browser --port=8899")
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" --LabApp.default_url=/lab/tree/notebooks $(ROOT_ARG) $(LAB_ARGS)

# `make test` spreads the test files over JOBS processes (pytest-xdist; --dist loadfile keeps
# each file's tests, each notebook's cells, in order in one process, and conftest.py keeps a
# lesson's learner and solution notebooks in one process, one after the other, so that the
# second reuses the first's training runs: course/memo.py), each torch on one thread: two processes with
# two threads each on two cores spin-wait for each other (lesson 11's training cell took over
# 300 s instead of 64 s). JOBS=1 runs everything in one process, as before.
JOBS ?= 2
test: $(STAMP) ## Unit and pipeline tests, then nbval over every notebook in notebooks/ and solutions/ (JOBS=2 processes)
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist loadfile

# The solution notebooks' printed outputs were made on one machine; another CPU rounds floats
# differently (other vector kernels in torch, MKL and oneDNN), and a cell that prints anything
# downstream of that rounding fails nbval there. test-portable runs nbval over solutions/ again
# on other kernels of this same CPU: torch's scalar kernels (ATEN_CPU_CAPABILITY=default), MKL
# held to SSE4.2 and oneDNN to SSE4.1, which change the last bits of matmul, softmax, exp, sums
# and convolutions (tools/kernel_paths.py shows which, and warns if nothing changed here).
# Scalar kernels are slow: a training cell may take several times its usual time, hence a
# cell timeout of 900 s here instead of make test's 300 s (seen: lessons 11 and 12's training
# cells passed 300 s on a busy 2-core AMD EPYC).
PORTABLE_ENV := ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41
test-portable: $(STAMP) ## The solution notebooks' nbval again on other CPU kernels: are their outputs the same on any CPU?
	$(PORTABLE_ENV) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python tools/kernel_paths.py
	$(PORTABLE_ENV) OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(BIN)/python -m pytest -n $(JOBS) --dist loadfile --nbval-cell-timeout=900 solutions

# test-fast leaves out the tests marked learner_notebooks (pyproject.toml): they judge notebooks/
# as committed, so they fail once a learner has worked there; `make test` runs them.
test-fast: $(STAMP) ## The Python tests in tests/ (no nbval), but not those that need notebooks/ unedited: safe after you work there
	$(BIN)/python -m pytest tests -p no:nbval -o addopts="" -q -m "not learner_notebooks"

notebooks: $(STAMP) ## Regenerate learner + solution notebooks from solutions/NN_*.py (one lesson: LESSON=02)
	$(BIN)/python -m course.authoring build $(LESSON)

# Translated editions (course/i18n.py, docs/authoring.md): the units of every lesson and docs page
# that has a catalogue in translations/<lang>/ merged into it, then the translated pages
# docs/<lang>/*.md written from them; PRUNE=1 also drops the obsolete entries.
PRUNE ?=
translations: $(STAMP) ## Update translations/ko/ from the English lessons and pages (changed: fuzzy; new: untranslated), write docs/ko/
	$(BIN)/python -m course.translations update $(LESSON)$(if $(PRUNE), --prune)

lint: $(STAMP) ## ruff on the package, tests, lesson sources and notebooks
	$(BIN)/ruff check course tests solutions notebooks
	$(BIN)/ruff format --check course tests

site: $(STAMP) ## Build the website into build/site/ from the executed notebooks (no execution; offline)
	$(BIN)/python tools/build_site.py

train: $(STAMP) ## Train the Transformer on lesson 09's task, print its held-out scores
	$(BIN)/python -m course.train --task toy-translation $(TRAIN_ARGS)

bench: $(STAMP) ## Time our Transformer against torch's, side by side, and print the ratios (minutes)
	$(BIN)/python -m course.bench $(BENCH_ARGS)

timings: $(STAMP) ## Time the course's commands here into docs/timings.json (slow: runs them all)
	$(BIN)/python tools/timings.py $(TIMINGS_ARGS)

progress: $(STAMP) ## Run your notebooks (copies, headless, each in a sandbox on Linux) and list every exercise's verdict
	$(BIN)/python -m course.progress $(PROGRESS_ARGS)

mutation: $(STAMP) ## Mutation score of `course` by tools/mutation.py (slow: minutes per module)
	$(BIN)/python tools/mutation.py $(MODULES)

clean: ## Remove caches and build leftovers, the website in build/ too (never notebooks or your work; keeps .venv)
	rm -rf .pytest_cache .ruff_cache build *.egg-info
	find course tests -name __pycache__ -type d -prune -exec rm -rf {} +

clean-venv: ## Remove .venv (the next make lab/test reinstalls it)
	rm -rf $(VENV)
