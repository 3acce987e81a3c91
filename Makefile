# Conveyor — every command a developer needs. `make run` and `make test` are
# the two a newcomer uses; each installs what it needs itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
PYTHON    ?= python3
VENV      := .venv
MOTO      := $(VENV)/bin/moto_server
OPENAPI_VALIDATOR := $(VENV)/bin/openapi-spec-validator
FUNCTIONS := $(notdir $(wildcard functions/*))
STATICCHECK_VERSION := v0.8.2
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20

.PHONY: help run test build lint bench chaos emulator clean invoke web test-web openapi

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

$(MOTO): localstack/requirements.txt
	@echo "installing the AWS emulator (moto) into $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check -r localstack/requirements.txt
	@touch $(MOTO)

emulator: $(MOTO) ## install the emulator (moto) into .venv

$(OPENAPI_VALIDATOR): openapi.requirements.txt | $(MOTO)
	@echo "installing openapi-spec-validator into $(VENV)"
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check -r openapi.requirements.txt
	@touch $(OPENAPI_VALIDATOR)

openapi: $(OPENAPI_VALIDATOR) ## validate openapi.yaml (openapi-spec-validator, pinned in openapi.requirements.txt)
	$(OPENAPI_VALIDATOR) openapi.yaml

run: $(MOTO) ## start the whole stack on localhost (emulator, gateway, pollers, simulator)
	@$(GO) build -o .local/bin/conveyor-local ./localstack/cmd/conveyor-local
	@exec .local/bin/conveyor-local

test: $(MOTO) ## everything: OpenAPI validation, unit, emulator-backed integration, CDK tests
	$(MAKE) --no-print-directory openapi
	$(GO) vet ./...
	$(GO) test -count=1 -race -timeout 12m $$($(GO) list ./... | grep -v /infra)
	@if [ -d infra ]; then $(GO) test -count=1 -timeout 12m ./infra/...; fi
	$(MAKE) --no-print-directory test-web

build: ## each function to bin/<name>/bootstrap (linux/arm64, static, stripped)
	@for f in $(FUNCTIONS); do \
		echo "build bin/$$f/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
	done

lint: ## go vet + staticcheck
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

bench: $(MOTO) ## measure requests/job, $/million jobs, latencies, throughput, bootstrap sizes (JOBS=1000)
	$(GO) run ./localstack/cmd/bench -jobs $(or $(JOBS),1000)

chaos: $(MOTO) ## crashes, duplicate deliveries, API storms on a private stack; checks the invariants (JOBS=200, LONG=1 for the long haul)
	$(GO) run ./localstack/cmd/chaos -jobs $(or $(JOBS),200) $(if $(LONG),-long)

web: ## build the dashboard into web/dist (npm ci + tsc; dist is committed, so go build needs no npm)
	cd web && npm ci --no-audit --no-fund && npm run build

test-web: web $(MOTO) ## the dashboard in Debian's chromium against a private local stack
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }
	node web/test/dashboard.test.mjs

clean: ## remove build output and the local state
	rm -rf bin cdk.out .local

-include infra/make.mk

invoke: ## feed EVENT=events/<file>.json to FN=<function> against the running stack
	@test -f .local/env || { echo "run \`make run\` first"; exit 1; }
	@set -a; . ./.local/env; set +a; $(GO) run ./localstack/cmd/invoke -fn $(FN) -event $(EVENT)
