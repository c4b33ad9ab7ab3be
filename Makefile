# agentloop — every target creates the virtualenv it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.DEFAULT_GOAL := help
.PHONY: help install test lint format schema chat

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP) ## create .venv and install the project with its dev tools

test: $(STAMP) ## run every test
	$(BIN)/python -m pytest

lint: $(STAMP) ## ruff, ruff format --check, mypy --strict on the library
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP) ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: $(STAMP) ## write docs/events.schema.json from the event models
	$(BIN)/python -m agentloop schema > docs/events.schema.json

chat: $(STAMP) ## ask the agent once from the terminal: make chat Q="question"
	$(BIN)/python -m agentloop chat "$(Q)"
