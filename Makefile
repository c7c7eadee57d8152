# The two commands of the README. Everything else is in scripts/ and the orrery CLI.
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: install run test test-fast lint format

install:
	./scripts/install.sh

## Set up, then serve the dashboard, API and a worker on embedded defaults (SQLite, no server).
run: install
	orrery serve

## Lint, then every test (PostgreSQL and Redis on 127.0.0.1 for the integration tests).
test: install
	ruff check .
	ruff format --check .
	pytest

## The tests that need no PostgreSQL, Redis, server, worker or browser (tests/tiers.py): minutes.
test-fast: install
	pytest -m "not slow"

format:
	ruff format .
	ruff check --fix .
