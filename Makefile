# mailroom — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO_DIR := .mailroom-demo
ENV_FILE ?= .env
HOST ?= 127.0.0.1
PORT ?= 8025
# Test processes (pytest-xdist); TEST_WORKERS=0 runs the suite in one process.
TEST_WORKERS ?= 3

.PHONY: demo demo-env test test-all lint bench fuzz clean

$(BIN)/.installed: pyproject.toml
	@bash scripts/bootstrap.sh "$(PYTHON)" "$(VENV)"
	@$(BIN)/pip install -q -e '.[test]'
	@touch $@

## demo: install, import the shipped sample corpus into .mailroom-demo/, serve on :8025
demo: $(BIN)/.installed demo-env
	@$(BIN)/mailroom --data-dir $(DEMO_DIR) import samples/demo-maildir --account demo
	@echo "To sign in (web page and JMAP), set a password for the demo user me, in another terminal:"
	@echo "  $(BIN)/mailroom --data-dir $(DEMO_DIR) user add me --password-stdin   then open http://$(HOST):$(PORT)/ and sign in as me"
	@$(BIN)/mailroom --data-dir $(DEMO_DIR) serve --host $(HOST) --port $(PORT)

## demo-env: make the demo store the default of mailroom commands run here (MAILROOM_DATA_DIR
## in ./.env, which mailroom reads from the working directory); an existing setting is kept
demo-env:
	@if [ -f $(ENV_FILE) ] && grep -q '^MAILROOM_DATA_DIR=' $(ENV_FILE); then \
	  echo "$(ENV_FILE) already sets MAILROOM_DATA_DIR; left as it is."; \
	else \
	  if [ -s $(ENV_FILE) ] && [ -n "$$(tail -c 1 $(ENV_FILE))" ]; then echo >> $(ENV_FILE); fi; \
	  echo "MAILROOM_DATA_DIR=$(abspath $(DEMO_DIR))" >> $(ENV_FILE); \
	  echo "Wrote MAILROOM_DATA_DIR=$(abspath $(DEMO_DIR)) to $(ENV_FILE): mailroom commands run here use the demo store."; \
	fi

## test: install, make sure PostgreSQL, Redis and Dovecot are there, run the suite
test: $(BIN)/.installed
	@bash scripts/test-services.sh
	@$(BIN)/pytest -q -n $(TEST_WORKERS)

## test-all: also the slow tests
test-all: $(BIN)/.installed
	@bash scripts/test-services.sh
	@$(BIN)/pytest -q -n $(TEST_WORKERS) -m ''

## fuzz: run each fuzz harness (MIME parser, IMAP FETCH reader, JMAP request parser) for
## FUZZ_SECONDS (600) seconds; inputs that break a contract land in fuzz/crashes/<name>/
FUZZ_SECONDS ?= 600
fuzz: $(BIN)/.installed
	@$(BIN)/pip install -q -e '.[fuzz]' || echo "atheris could not be installed; the harnesses use their plain random-mutation loop."
	@for harness in mime fetch jmap_request; do \
	  echo "== fuzz.$$harness for $(FUZZ_SECONDS) s"; \
	  $(BIN)/python -m fuzz.$$harness --seconds $(FUZZ_SECONDS) || exit 1; \
	done

lint: $(BIN)/.installed
	@$(BIN)/ruff check src tests bench
	@$(BIN)/ruff format --check src tests bench || true
	@$(BIN)/mypy

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache .mypy_cache .ruff_cache
