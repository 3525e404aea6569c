# Every target does its own set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
OPENCL_STAMP := $(VENV)/.opencl-checked

.PHONY: test demo lint venv bench clean

$(STAMP): setup.py pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

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

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint $(OPENCL_STAMP)
	$(BIN)/python -m pytest tests theano_dag -p no:cacheprovider

demo: $(STAMP)
	$(BIN)/python examples/train_digits.py

bench: $(STAMP)
	$(BIN)/python benchmarks/graph_core.py

clean:
	rm -rf $(VENV) build *.egg-info
