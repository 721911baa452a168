# autorec: `make demo` installs, then runs the quickstart study (studies/quickstart.yaml); `make test` runs the tests.
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: install demo test test-all lint bench clean

install:
	@bash tools/install.sh

demo: install
	$(BIN)/autorec search studies/quickstart.yaml

# The PostgreSQL storage tests use a real server on loopback (tools/start_postgres.sh); where it
# cannot be started (no root to install it), those tests are skipped unless CI requires them.
PG_URL = $${AUTOREC_TEST_POSTGRES_URL:-$$(bash tools/start_postgres.sh 2>/dev/null || true)}

test: install
	AUTOREC_TEST_POSTGRES_URL=$(PG_URL) $(BIN)/python -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: install
	AUTOREC_TEST_POSTGRES_URL=$(PG_URL) $(BIN)/python -m pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check autorec tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
