# autorec: `make demo` runs the main job on the embedded default; `make test` runs the tests.
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install demo test test-all lint bench clean

install:
	@bash tools/install.sh

demo: install
	$(BIN)/autorec train --data movielens100k --arch dlrm --epochs 10

test: install
	$(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check autorec tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
