# Every target does its own set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OPENCL_STAMP := $(VENV)/.opencl-checked
# theano-pymc 1.1.2 needs numpy<1.24 and scipy<1.10: its interop tests get their own venv
THEANO_VENV := .venv-theano
THEANO_STAMP := $(THEANO_VENV)/.installed
THEANO_FLAGS_TEST := blas__ldflags=,base_compiledir=$(CURDIR)/build/theano

.PHONY: test demo docs-check lint venv venv-theano venv-pymc3 pymc3-suite venv-lasagne lasagne-suite bench bench-sparse clean dist-check test-no-cxx docs theano-suite theano-fuzz theano-graph-tests theano-sparse-tests theano-rest-tests tutorials-suite client-suites theano-docs fuzz scan-fuzz

# setup.py and callstub.c: the editable install builds the C half of the call in place,
# so a change to it reinstalls.
$(STAMP): pyproject.toml setup.py theano_dag/engines/callstub.c
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev,dask]'
	touch $(STAMP)

venv: $(STAMP)

$(THEANO_STAMP): pyproject.toml
	test -x $(THEANO_VENV)/bin/python || $(PY) -m venv $(THEANO_VENV)
	$(THEANO_VENV)/bin/python -m pip install -q "theano-pymc==1.1.2" "numpy==1.23.5" \
	  "scipy==1.9.3" pytest pytest-xdist hypothesis
	$(THEANO_VENV)/bin/python -m pip install -q -e .
	touch $(THEANO_STAMP)

venv-theano: $(THEANO_STAMP)

# PyMC3 3.11.6 on both Theanos (make pymc3-suite, tests/compat/test_pymc3_interop.py): one
# venv, PyMC3's dependencies pinned (tools/pymc3_requirements.txt: its own pins have no
# Python 3.11 wheels, so pymc3 comes without them), theano_dag with its theano alias, and
# theano-pymc off sys.path in .venv-pymc3/theano-pymc for the other side.
PYMC3_VENV := .venv-pymc3
PYMC3_STAMP := $(PYMC3_VENV)/.installed
$(PYMC3_STAMP): pyproject.toml setup.py tools/pymc3_requirements.txt
	test -x $(PYMC3_VENV)/bin/python || $(PY) -m venv $(PYMC3_VENV)
	$(PYMC3_VENV)/bin/python -m pip install -q -r tools/pymc3_requirements.txt
	$(PYMC3_VENV)/bin/python -m pip install -q --no-deps "pymc3==3.11.6"
	rm -rf $(PYMC3_VENV)/theano-pymc
	$(PYMC3_VENV)/bin/python -m pip install -q --no-deps --target $(PYMC3_VENV)/theano-pymc \
	  "theano-pymc==1.1.2"
	rm -rf $(PYMC3_VENV)/theano-pymc/tests  # theano-pymc's wheel ships a top-level tests
	$(PYMC3_VENV)/bin/python -m pip install -q --no-deps -e .
	$(PYMC3_VENV)/bin/python -m theano_dag.compat install-theano-alias
	touch $(PYMC3_STAMP)

venv-pymc3: $(PYMC3_STAMP)

# Lasagne's own tests on both Theanos (make lasagne-suite): one venv as for PyMC3, numpy
# 1.23.5, scipy 1.9.3, pytest 7 (Lasagne's conftest uses a hook argument pytest 8 dropped),
# mock; theano_dag with its theano alias, theano-pymc off sys.path for the other side.
LASAGNE_VENV := .venv-lasagne
LASAGNE_STAMP := $(LASAGNE_VENV)/.installed
$(LASAGNE_STAMP): pyproject.toml setup.py
	test -x $(LASAGNE_VENV)/bin/python || $(PY) -m venv $(LASAGNE_VENV)
	$(LASAGNE_VENV)/bin/python -m pip install -q "numpy==1.23.5" "scipy==1.9.3" \
	  "pytest==7.4.4" mock filelock
	rm -rf $(LASAGNE_VENV)/theano-pymc
	$(LASAGNE_VENV)/bin/python -m pip install -q --no-deps --target $(LASAGNE_VENV)/theano-pymc \
	  "theano-pymc==1.1.2"
	rm -rf $(LASAGNE_VENV)/theano-pymc/tests
	$(LASAGNE_VENV)/bin/python -m pip install -q --no-deps -e .
	$(LASAGNE_VENV)/bin/python -m theano_dag.compat install-theano-alias
	touch $(LASAGNE_STAMP)

venv-lasagne: $(LASAGNE_STAMP)

# PoCL from pip (in the dev extra) is tried first. On virtual machines whose CPUID hides
# the CPU model it cannot build kernels; then Debian's PoCL is installed (root only).
# With no usable device at all the OpenCL tests skip and say why.
$(OPENCL_STAMP): $(STAMP)
	$(BIN)/python tools/opencl_probe.py || \
	  { if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q pocl-opencl-icd >/dev/null || \
	      { apt-get update -q >/dev/null && \
	        DEBIAN_FRONTEND=noninteractive apt-get install -y -q pocl-opencl-icd >/dev/null; }; \
	    fi; $(BIN)/python tools/opencl_probe.py || echo "no usable OpenCL device"; }
	touch $(OPENCL_STAMP)

# ruff, then the floors of docs/architecture.md (import-linter's contracts in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-logo --no-cache

# The suite runs the CPU engine poisoned (docs/engines.md, "Options"): every planned
# buffer holds NaN or 0xA5 bytes until written, so a read before a write fails a test
# every time; test-no-cxx runs a part of it unpoisoned. tests/test_docs_site.py runs in
# `make docs`, on the site it builds (here it would build the site a second time).
# Two pytest processes (pytest-xdist), each test to whichever is free: on the 2-core CI
# machine with a cold kernel cache the main suite took 19.1 minutes in one process (one
# core idle while a test runs Python) and 11.9 in two, for the same CPU time (0.95x).
PYTEST_PROCESSES ?= -n 2 --dist worksteal
test: lint $(OPENCL_STAMP) $(THEANO_STAMP) $(PYMC3_STAMP)
	THEANO_DAG_FLAGS=cpu__poison=True $(BIN)/python -m pytest tests theano_dag -p no:cacheprovider \
	  --ignore=tests/test_docs_site.py $(PYTEST_PROCESSES)
	THEANO_FLAGS='$(THEANO_FLAGS_TEST)' $(THEANO_VENV)/bin/python -m pytest \
	  tests_theano theano_dag/formats/theano_interop.py -p no:cacheprovider
	THEANO_DAG_FLAGS=cpu__poison=True $(THEANO_VENV)/bin/python -m pytest $(OLDEST_TESTS) \
	  -p no:cacheprovider $(PYTEST_PROCESSES)
	$(MAKE) test-no-cxx
	$(MAKE) docs
	$(MAKE) dist-check

# The oldest numpy and scipy the package supports (1.23 and 1.9: theano-pymc's venv has
# them, as PyMC3's and Lasagne's users do), on the tests whose code paths differ between
# numpy releases (promotion of scalars, np.exceptions, scipy canonicalising in place): every
# op against numpy, the array ops' errors, linear algebra, sparse edge cases (1 min).
OLDEST_TESTS := tests/tensor/test_op_table.py tests/tensor/test_arrays.py \
  tests/tensor/test_linalg.py tests/sparse/test_edge_cases.py \
  tests/tensor/test_theano_basic_compat.py tests/tensor/test_basic_ops.py \
  tests/engines/test_cpu.py

# What a user without a C compiler gets (macOS, Windows, no gcc: docs/engines.md,
# "Platforms"): the CPU engine's numpy path and the Python half of the call
# (THEANO_DAG_PY_CALL), on a fast subset (2.5 min on 2 busy cores).
NO_CXX_TESTS := tests/engines/test_cpu.py tests/engines/test_blas_products.py \
  tests/engines/test_tiling.py tests/engines/test_memory.py tests/compile
test-no-cxx: $(STAMP)
	THEANO_DAG_FLAGS=cxx= THEANO_DAG_PY_CALL=1 $(BIN)/python -m pytest $(NO_CXX_TESTS) \
	  -p no:cacheprovider $(PYTEST_PROCESSES)

# The built wheel and sdist, each installed into a fresh venv: no scipy at import, the
# bundled data and C sources present, the README's and docs/index.md's examples run.
dist-check: $(STAMP)
	$(BIN)/python tools/check_dist.py

# The site and its API reference (mkdocs + mkdocstrings, the docs extra, in dev) into
# build/site; strict: a broken link or reference, a page outside the nav, or any other
# warning fails it. Then tests/test_docs_site.py on what it built: no URL of another host
# loaded (the site works offline), every page in the nav, and the browser check where a
# Chromium is installed (docs-check installs one).
docs: $(STAMP)
	$(BIN)/mkdocs build --strict
	THEANO_DAG_DOCS_SITE=build/site $(BIN)/python -m pytest tests/test_docs_site.py \
	  -p no:cacheprovider

# Every page of the built site in a headless Chromium (tools/docs_check.py): no console
# error, no request to another host, no broken image, link or anchor, no table wider than
# the page. Playwright is in the docs extra and drives the system's Chromium (installed
# here from Debian when root); without a Chromium the check is skipped with a message.
docs-check: docs
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || \
	  { if command -v apt-get >/dev/null && [ "$$(id -u)" = 0 ]; then \
	      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || \
	      { apt-get update -q >/dev/null && \
	        DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	    fi; }
	$(BIN)/python tools/docs_check.py build/site

# The differential fuzzer (theano_dag/testing/fuzz.py): N random graphs from SEED on every
# engine here, against numpy; each failure is shrunk and printed as a script.
# FUZZ_ARGS: more of its options (--lazy: lazy ifelse graphs too; --extra-ops: the extra
# ops, special functions to unique; --values wide; --layouts mixed: input arrays strided,
# reversed, Fortran-ordered, unaligned...; --layouts aliased: the second call given the
# shared variable's array or a borrowed output of the first call).
N ?= 1000
SEED ?= 0
FUZZ_ARGS ?=
fuzz: $(STAMP) $(OPENCL_STAMP)
	$(BIN)/python -m theano_dag.testing.fuzz --n $(N) --seed $(SEED) $(FUZZ_ARGS)

# The loop fuzzer (theano_dag/testing/scan_fuzz.py): N random scan calls from SEED on
# every engine here (OpenCL on every 10th), values and gradients against numpy loops.
scan-fuzz: $(STAMP) $(OPENCL_STAMP)
	$(BIN)/python -m theano_dag.testing.scan_fuzz --n $(N) --seed $(SEED)

# The fuzzer's graphs on theano-pymc 1.1.2 (tools/theano_fuzz.py): the graphs where
# Theano's values are not numpy's, to read; reproducers in build/theano-fuzz/.
theano-fuzz: $(STAMP) $(THEANO_STAMP)
	$(BIN)/python tools/theano_fuzz.py $(THEANO_VENV)/bin/python --n $(N) --seed $(SEED)

# The demo needs the package and numpy only: its own small venv (not the dev one), a
# regular (not editable) install that reinstalls when a source changes, and nothing
# printed but the demo's own output.
DEMO_VENV := .venv-demo
DEMO_STAMP := $(DEMO_VENV)/.installed
DEMO_SOURCES := pyproject.toml setup.py $(shell find theano_dag -name '*.py' -o -name '*.c' \
  -o -name '*.npz')
$(DEMO_STAMP): $(DEMO_SOURCES)
	@test -x $(DEMO_VENV)/bin/python || $(PY) -m venv $(DEMO_VENV)
	@$(DEMO_VENV)/bin/python -m pip install -q --disable-pip-version-check . >/dev/null
	@touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	@$(DEMO_VENV)/bin/python examples/train_digits.py

BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install -q -e '.[bench]'
	touch $(BENCH_STAMP)

# Every benchmark with the peers side by side, then the tables and plot of docs/performance.md.
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/run_all.py --args compile_time='--pytensor-max 4000'
	$(BIN)/python benchmarks/plot_results.py
	$(BIN)/python benchmarks/networks.py --render benchmarks/results/latest.jsonl

# benchmarks/sparse_products.py with PyTorch's sparse CSR beside scipy.sparse: its own venv, so that
# the dev venv stays without torch. TORCH picks the release: 2.13.0 is a CPU build (a newer
# one from PyPI may be a CUDA build of several GB); OPENBLAS_CORETYPE unset, so that numpy
# and torch pick their own kernels.
BENCH_TORCH_VENV := .venv-bench-torch
BENCH_TORCH_STAMP := $(BENCH_TORCH_VENV)/.installed
TORCH ?= torch==2.13.0
$(BENCH_TORCH_STAMP): pyproject.toml setup.py
	test -x $(BENCH_TORCH_VENV)/bin/python || $(PY) -m venv $(BENCH_TORCH_VENV)
	$(BENCH_TORCH_VENV)/bin/python -m pip install -q --upgrade pip
	$(BENCH_TORCH_VENV)/bin/python -m pip install -q "$(TORCH)" "threadpoolctl>=3.1,<4"
	$(BENCH_TORCH_VENV)/bin/python -m pip install -q -e '.[scipy]'
	touch $(BENCH_TORCH_STAMP)

bench-sparse: $(BENCH_TORCH_STAMP)
	env -u OPENBLAS_CORETYPE $(BENCH_TORCH_VENV)/bin/python benchmarks/sparse_products.py

clean:
	rm -rf $(VENV) $(THEANO_VENV) $(PYMC3_VENV) $(LASAGNE_VENV) $(DEMO_VENV) $(BENCH_TORCH_VENV) build dist *.egg-info

# theano-pymc 1.1.2's own tensor, compile and gradient tests, run against theano_dag with
# the imports changed and against theano-pymc itself; counts in build/theano-suite/.
# THEANO_SRC: a Theano-PyMC clone (made here when absent, which needs the network).
THEANO_SRC ?= build/Theano-PyMC
THEANO_SUITE_EVERY ?= 3
theano-suite: $(STAMP) $(THEANO_STAMP)
	test -d $(THEANO_SRC) || git clone -q --branch rel-1.1.2 --depth 1 \
	  https://github.com/pymc-devs/Theano-PyMC $(THEANO_SRC)
	$(BIN)/python tools/theano_suite.py --src $(THEANO_SRC) --every $(THEANO_SUITE_EVERY) \
	  --theano-python $(THEANO_VENV)/bin/python --dag-python $(BIN)/python

# The examples of Theano 1.1.2's documentation (doc/*.txt, Sphinx's doctest builder) on
# theano-pymc and on theano_dag through the alias, compared example by example; in the
# Lasagne venv, counts in build/theano-docs/results.jsonl.
theano-docs: $(STAMP) $(LASAGNE_STAMP)
	test -d $(THEANO_SRC) || git clone -q --branch rel-1.1.2 --depth 1 \
	  https://github.com/pymc-devs/Theano-PyMC $(THEANO_SRC)
	$(BIN)/python tools/theano_docs.py --src $(THEANO_SRC) --python $(LASAGNE_VENV)/bin/python \
	  --theano-pymc $(LASAGNE_VENV)/theano-pymc --show

# Theano's own tests/graph and tests/link (all of them), on the theano_dag side only.
theano-graph-tests: $(STAMP)
	test -d $(THEANO_SRC) || git clone -q --branch rel-1.1.2 --depth 1 \
	  https://github.com/pymc-devs/Theano-PyMC $(THEANO_SRC)
	$(BIN)/python tools/theano_suite.py --src $(THEANO_SRC) --selection graph-link \
	  --side theano_dag --work build/theano-graph-tests --dag-python $(BIN)/python --show

# Theano's own tests/sparse (every file, every test) on both sides; counts per file in
# build/theano-sparse/ (the README's sparse table).
theano-sparse-tests: $(STAMP) $(THEANO_STAMP)
	test -d $(THEANO_SRC) || git clone -q --branch rel-1.1.2 --depth 1 \
	  https://github.com/pymc-devs/Theano-PyMC $(THEANO_SRC)
	$(BIN)/python tools/theano_suite.py --src $(THEANO_SRC) --selection sparse \
	  --work build/theano-sparse --theano-python $(THEANO_VENV)/bin/python \
	  --dag-python $(BIN)/python --show

# The rest of Theano's CPU tests (nnet, signal, random, scan, scalar, typed_list, misc, the
# top-level files), every test, on the theano_dag side only.
theano-rest-tests: $(STAMP)
	test -d $(THEANO_SRC) || git clone -q --branch rel-1.1.2 --depth 1 \
	  https://github.com/pymc-devs/Theano-PyMC $(THEANO_SRC)
	$(BIN)/python tools/theano_suite.py --src $(THEANO_SRC) --selection rest \
	  --work build/theano-rest --side theano_dag --dag-python $(BIN)/python --show

# PyMC3 3.11.6's own tests (pymc3/tests, from its wheel), a fixed sample of each file
# (PYMC3_SUITE_PER_FILE tests at most), on theano-pymc 1.1.2 and on theano_dag through the
# theano alias; counts per file in build/pymc3-suite/results.jsonl and a table as the
# README's. Slow (tens of minutes: theano-pymc compiles C), so not part of make test.
PYMC3_SUITE_PER_FILE ?= 10
pymc3-suite: $(STAMP) $(PYMC3_STAMP)
	$(BIN)/python tools/pymc3_suite.py --python $(PYMC3_VENV)/bin/python \
	  --theano-pymc $(PYMC3_VENV)/theano-pymc --per-file $(PYMC3_SUITE_PER_FILE) --table

# Theano's deep-learning tutorials (lisa-lab/DeepLearningTutorials' code/, on stand-in
# data) on theano-pymc 1.1.2 and on theano_dag through the theano alias, every compiled
# function's results compared call by call; TUTORIALS_SRC: a checkout (cloned here when
# absent, which needs the network); TUTORIALS_FLAGS: THEANO_FLAGS of both sides. One JSON
# line per tutorial in build/tutorials-suite/results.jsonl. Not part of make test.
TUTORIALS_SRC ?= build/DeepLearningTutorials
TUTORIALS_FLAGS ?=
tutorials-suite: $(STAMP) $(THEANO_STAMP)
	test -d $(TUTORIALS_SRC) || git clone -q --depth 1 \
	  https://github.com/lisa-lab/DeepLearningTutorials $(TUTORIALS_SRC)
	$(BIN)/python tools/tutorials_suite.py --src $(TUTORIALS_SRC) \
	  --theano-python $(THEANO_VENV)/bin/python --dag-python $(BIN)/python \
	  --flags "$(TUTORIALS_FLAGS)"

# Lasagne's own tests (lasagne/tests, every file and test, --runslow, and its modules'
# doctests, as Lasagne's CI ran them) on theano-pymc 1.1.2 in Python mode and on theano_dag
# through the theano alias; LASAGNE_SRC: a Lasagne checkout (cloned here when absent, which
# needs the network); LASAGNE_FLAGS: THEANO_FLAGS of both sides (floatX=float32...). Counts
# per file in build/lasagne-suite/results.jsonl and a table as the README's. Not part of
# make test.
LASAGNE_SRC ?= build/Lasagne
LASAGNE_FLAGS ?=
lasagne-suite: $(STAMP) $(LASAGNE_STAMP)
	test -d $(LASAGNE_SRC) || git clone -q --depth 1 https://github.com/Lasagne/Lasagne $(LASAGNE_SRC)
	$(BIN)/python tools/lasagne_suite.py --python $(LASAGNE_VENV)/bin/python \
	  --theano-pymc $(LASAGNE_VENV)/theano-pymc --lasagne $(LASAGNE_SRC) \
	  --flags "$(LASAGNE_FLAGS)" --table

# The own tests of Keras 2.3.1 (its Theano backend), theanets, downhill, Blocks, TheanoLM,
# pymanopt 0.2.5's Theano backend and SymPy's Theano printer (from its wheel), every file
# and test, on theano-pymc 1.1.2 in Python mode and on theano_dag through the theano alias,
# in the Lasagne venv, and exoplanet 0.5.3's, celerite2 0.2.1's and pymc3-ext 0.1.0's in
# the PyMC3 venv; KERAS_SRC, THEANETS_SRC, DOWNHILL_SRC, BLOCKS_SRC (and FUEL_SRC, which
# Blocks imports), THEANOLM_SRC, PYMANOPT_SRC, EXOPLANET_SRC, CELERITE2_SRC, PYMC3_EXT_SRC:
# their git checkouts (cloned here when absent, which needs the network);
# CLIENT_FLAGS: more THEANO_FLAGS of both sides.
# Counts per file in build/client-suites/<library>.jsonl and a table each. Not part of make
# test.
KERAS_SRC ?= build/keras
THEANETS_SRC ?= build/theanets
DOWNHILL_SRC ?= build/downhill
BLOCKS_SRC ?= build/blocks
FUEL_SRC ?= build/fuel
THEANOLM_SRC ?= build/theanolm
PYMANOPT_SRC ?= build/pymanopt
EXOPLANET_SRC ?= build/exoplanet
CELERITE2_SRC ?= build/celerite2
PYMC3_EXT_SRC ?= build/pymc3-ext
CLIENT_FLAGS ?=
client-suites: $(STAMP) $(LASAGNE_STAMP) $(PYMC3_STAMP)
	test -d $(KERAS_SRC) || git clone -q --depth 1 --branch 2.3.1 \
	  https://github.com/keras-team/keras $(KERAS_SRC)
	test -d $(THEANETS_SRC) || git clone -q --depth 1 https://github.com/lmjohns3/theanets $(THEANETS_SRC)
	test -d $(DOWNHILL_SRC) || git clone -q --depth 1 https://github.com/lmjohns3/downhill $(DOWNHILL_SRC)
	test -d $(BLOCKS_SRC) || git clone -q --depth 1 https://github.com/mila-udem/blocks $(BLOCKS_SRC)
	test -d $(FUEL_SRC) || git clone -q --depth 1 https://github.com/mila-udem/fuel $(FUEL_SRC)
	test -d $(THEANOLM_SRC) || git clone -q --depth 1 https://github.com/senarvi/theanolm \
	  $(THEANOLM_SRC)
	test -d $(PYMANOPT_SRC) || git clone -q --depth 1 --branch 0.2.5 \
	  https://github.com/pymanopt/pymanopt $(PYMANOPT_SRC)
	test -d $(EXOPLANET_SRC) || git clone -q --depth 1 --branch v0.5.3 \
	  https://github.com/exoplanet-dev/exoplanet $(EXOPLANET_SRC)
	test -d $(CELERITE2_SRC) || git clone -q --depth 1 --branch v0.2.1 \
	  https://github.com/exoplanet-dev/celerite2 $(CELERITE2_SRC)
	test -d $(PYMC3_EXT_SRC) || git clone -q --depth 1 --branch v0.1.0 \
	  https://github.com/exoplanet-dev/pymc3-ext $(PYMC3_EXT_SRC)
	$(BIN)/python tools/client_suites.py --python $(LASAGNE_VENV)/bin/python \
	  --theano-pymc $(LASAGNE_VENV)/theano-pymc --keras $(KERAS_SRC) \
	  --theanets $(THEANETS_SRC) --downhill $(DOWNHILL_SRC) --blocks $(BLOCKS_SRC) \
	  --fuel $(FUEL_SRC) --theanolm $(THEANOLM_SRC) --pymanopt $(PYMANOPT_SRC) \
	  --exoplanet $(EXOPLANET_SRC) --celerite2 $(CELERITE2_SRC) --pymc3-ext $(PYMC3_EXT_SRC) \
	  --pymc3-python $(PYMC3_VENV)/bin/python \
	  --pymc3-theano-pymc $(PYMC3_VENV)/theano-pymc \
	  --flags "$(CLIENT_FLAGS)" --table
