# agentloop — every target creates the virtualenv it needs.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Two stamps: the server's dependencies (what make dev, chat, invoke and research need), then
# the test and lint tools on top (make test, lint); pyproject.toml's extras `server` and `dev`.
STAMP     := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.DEFAULT_GOAL := help
.PHONY: help install test lint format schema chat dev invoke validate package bench prices

# The help texts are this file's `## ` comments, with $(PORT) filled in, in one aligned column.
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/\$$(PORT)/$(PORT)/g' | awk -F':.*## ' \
	  '{ name[NR] = $$1; text[NR] = $$2; if (length($$1) > width) width = length($$1) } \
	   END { for (i = 1; i <= NR; i++) printf "  %-" width "s  %s\n", name[i], text[i] }'

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[server]"
	touch $(STAMP)

$(DEV_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(DEV_STAMP)

install: $(DEV_STAMP) ## create .venv with the project, its test and lint tools

test: $(DEV_STAMP) chromium bwrap node-clients sandbox-stack ## run every test (Chromium and bubblewrap are installed as root)
	$(BIN)/python -m pytest

# ---- code isolation: execute_code runs local programs under bubblewrap (Debian's bubblewrap,
# about 150 kB). Missing, it is installed when running as root; otherwise the isolation tests
# skip and say so, and `make dev` leaves execute_code out unless AGENTLOOP_SANDBOX_ISOLATION
# says unisolated (docs/tools.md).
.PHONY: bwrap
bwrap: ## make sure bubblewrap is there for execute_code's isolation (apt-get install as root)
	@if ! command -v bwrap >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing Debian's bubblewrap for execute_code's isolation (apt-get)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap \
	    >/dev/null || exit 1; \
	fi
	@command -v bwrap >/dev/null 2>&1 || echo "note: bubblewrap (bwrap) is not installed: \
	execute_code's isolation tests will skip, and make dev will not offer execute_code"

# ---- execute_code's libraries: numpy, pandas and matplotlib (functions/sandbox/requirements.txt)
# for this project's interpreter in .sandbox-stack/ (about 160 MiB; 12 s from a warm pip
# cache): site/ (pip --target, without test suites and build inputs), matplotlib's font list
# built once, and manifest.json (the versions). Programs get it read-only (docs/tools.md); it
# is rebuilt, whole, only when the requirements change. make package builds its Lambda layer.
STACK_STAMP := .sandbox-stack/manifest.json
.PHONY: sandbox-stack
sandbox-stack: $(STACK_STAMP) ## install numpy, pandas, matplotlib for execute_code's programs (.sandbox-stack)

$(STACK_STAMP): functions/sandbox/requirements.txt | $(STAMP)
	$(BIN)/python functions/package.py --local-stack .sandbox-stack
	touch $@

# ---- client libraries: the protocol faces are tested with the real JavaScript clients (the
# `ai` package, @ai-sdk/react, @ag-ui/client, esbuild for the React page), run by the
# machine's Node.js (20 or later). npm ci installs exactly tests/node/package-lock.json (about
# 65 MB) into tests/node/node_modules; it runs again only when the lockfile changes.
NODE_CLIENTS := tests/node/node_modules/.package-lock.json
.PHONY: node-clients
node-clients: $(NODE_CLIENTS) ## install the pinned JavaScript clients the face tests drive

$(NODE_CLIENTS): tests/node/package-lock.json tests/node/package.json
	@command -v npm >/dev/null 2>&1 || { echo "error: the face tests need Node.js 20+ and npm \
	(on Debian: apt-get install nodejs npm)" >&2; exit 1; }
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# ---- browser tests: tests/e2e drive Debian's Chromium through Playwright for Python --------
# Playwright's own browser download is never used; Chromium comes from Debian's packages
# (about 480 MB installed). Missing, it is installed when running as root, else make stops
# and says what to install. CHROMIUM is read by the tests too.
CHROMIUM ?= /usr/bin/chromium
export CHROMIUM
.PHONY: chromium screenshot

chromium: ## make sure Chromium is there for the browser tests (apt-get install as root)
	@if [ ! -x "$(CHROMIUM)" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the browser tests (apt-get, about 480 MB)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
	      >/dev/null || exit 1; \
	  fi; \
	  if [ ! -x "$(CHROMIUM)" ]; then \
	    echo "error: the browser tests (tests/e2e) need Chromium at $(CHROMIUM)." >&2; \
	    echo "  On Debian: sudo apt-get install chromium   (then run make test again)" >&2; \
	    echo "  Elsewhere: make test CHROMIUM=/path/to/chromium" >&2; \
	    exit 1; \
	  fi; \
	fi

screenshot: $(DEV_STAMP) chromium ## write docs/chat-page.png (the chat page, scripted model, Chromium)
	$(BIN)/python -m tests.e2e.screenshot docs/chat-page.png

lint: $(DEV_STAMP) ## ruff, ruff format --check, mypy --strict on the library
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(DEV_STAMP) ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

schema: $(STAMP) ## write docs/events.schema.json from the event models
	$(BIN)/python -m agentloop schema > docs/events.schema.json

# An empty Q is refused before anything is installed or sent. The question is read as the shell
# variable Q (make exports a Q given on its command line), so quotes and $ in it arrive intact.
chat: ## ask the agent once from the terminal: make chat Q="question"
	@if [ -z "$$(printf '%s' "$$Q" | tr -d '[:space:]')" ]; then \
	  echo 'usage: make chat Q="your question"' >&2; exit 2; \
	fi
	@$(MAKE) -q $(STAMP) || $(MAKE) --no-print-directory $(STAMP)
	$(BIN)/python -m agentloop chat "$$Q"

# Research jobs, locally and concurrently, the way the worker runs them; results go to
# AGENTLOOP_RESULTS_DIR (./research-output) or to S3 when AGENTLOOP_RESULTS_BUCKET is set.
# Exit status: 1 when a job failed or was rejected (the table says why), 2 when JOBS is unusable.
JOBS ?= examples/jobs.json
CONCURRENCY ?= 4
.PHONY: research
research: $(STAMP) ## run research jobs locally: make research JOBS=examples/jobs.json [INVOCATION_TIMEOUT=60]
	$(BIN)/python -m agentloop.research "$(JOBS)" --concurrency $(CONCURRENCY) $(if $(INVOCATION_TIMEOUT),--invocation-timeout $(INVOCATION_TIMEOUT))

# ---- benchmarks: agentloop next to the bare SDKs and other agent frameworks -----------------
# The frameworks compared in docs/benchmarks.md (and matplotlib, pyinstrument) live in their own
# virtualenv, pinned in bench/requirements.txt: they are never dependencies of the project.
BENCH_VENV  ?= .venv-bench
BENCH_BIN   := $(BENCH_VENV)/bin
BENCH_STAMP := $(BENCH_VENV)/.installed

$(BENCH_STAMP): pyproject.toml bench/requirements.txt
	$(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_BIN)/python -m pip install --quiet --upgrade pip
	$(BENCH_BIN)/python -m pip install --quiet -e ".[chat]" -r bench/requirements.txt
	touch $@

bench: $(DEV_STAMP) $(BENCH_STAMP) node-clients sandbox-stack bwrap ## measure agentloop vs bare SDKs and frameworks; writes docs/benchmarks.md
	$(BENCH_BIN)/python bench/run.py
	$(BIN)/python bench/research_throughput.py

# Local runs: auth is off unless you set AGENTLOOP_AUTH_MODE (and token hashes) yourself.
PORT ?= 8000
AGENTLOOP_AUTH_MODE ?= none
export AGENTLOOP_AUTH_MODE

dev: $(STAMP) bwrap sandbox-stack ## serve the chat app on http://127.0.0.1:$(PORT) (keys from the environment; installs only the server)
	$(BIN)/python -m uvicorn --app-dir functions/chat --host 127.0.0.1 --port $(PORT) chat_app:app

# The sample events carry "Bearer local-dev-token": make invoke checks it like the deployed app.
EVENT ?= events/chat.json
invoke: $(STAMP) ## replay an event as sam local invoke would: make invoke EVENT=events/chat.json
	AGENTLOOP_AUTH_MODE=bearer \
	AGENTLOOP_AUTH_TOKEN_SHA256=$$($(BIN)/python -c "from agentloop.auth import hash_token; print(hash_token('local-dev-token'))") \
	$(BIN)/python functions/invoke.py $(EVENT)

# ---- infrastructure: template checks and Lambda artifacts -----------------------------------
# The SAM CLI and cfn-lint live in their own virtualenv: they are large (about 340 MB) and pin
# versions of boto3 and jsonschema that the project's .venv should not have to share. The
# versions are pinned so that "validate is clean" means the same thing on every machine; the
# stamp is named after them, so changing a pin reinstalls.
INFRA_VENV       ?= .venv-infra
INFRA_BIN        := $(INFRA_VENV)/bin
SAM_CLI_VERSION  := 1.170.0
CFN_LINT_VERSION := 1.58.0
INFRA_STAMP      := $(INFRA_VENV)/.installed-sam-$(SAM_CLI_VERSION)-cfn-lint-$(CFN_LINT_VERSION)
# `sam validate --lint` works offline and needs no AWS account, but the SAM CLI and cfn-lint
# read a region (and would pick up a developer's profile): pin a region and dummy credentials
# for these commands only, so the result never depends on who runs them. No AWS call is made.
INFRA_ENV := env -u AWS_PROFILE -u AWS_SESSION_TOKEN AWS_REGION=us-east-1 \
	AWS_DEFAULT_REGION=us-east-1 AWS_ACCESS_KEY_ID=validate-only \
	AWS_SECRET_ACCESS_KEY=validate-only SAM_CLI_TELEMETRY=0

$(INFRA_STAMP):
	$(PYTHON) -m venv $(INFRA_VENV)
	echo '*' > $(INFRA_VENV)/.gitignore
	$(INFRA_BIN)/python -m pip install --quiet --upgrade pip
	$(INFRA_BIN)/python -m pip install --quiet "aws-sam-cli==$(SAM_CLI_VERSION)" "cfn-lint==$(CFN_LINT_VERSION)"
	rm -f $(INFRA_VENV)/.installed-*
	touch $@

validate: $(INFRA_STAMP) ## cfn-lint and sam validate --lint on template.yaml (offline)
	$(INFRA_ENV) $(INFRA_BIN)/cfn-lint template.yaml
	$(INFRA_ENV) $(INFRA_BIN)/sam validate --lint --template template.yaml

prices: $(STAMP) ## remake agentloop/prices.json (the flat prices) from the installed genai-prices
	$(BIN)/python -m agentloop.price_snapshot

package: sandbox-stack ## build the layers and the functions for python3.13/arm64 into build/, print sizes
	$(PYTHON) functions/package.py
