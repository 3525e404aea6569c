# Every target does its own set-up on a fresh machine.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint venv bench clean

$(STAMP): setup.py pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest tests theano_dag -p no:cacheprovider

demo: $(STAMP)
	$(BIN)/python examples/train_digits.py

bench: $(STAMP)
	$(BIN)/python benchmarks/graph_core.py

clean:
	rm -rf $(VENV) build *.egg-info
