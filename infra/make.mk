# Infrastructure targets, included by the top-level Makefile
# (`-include infra/make.mk`). The CDK CLI is installed from npm into
# .cache/cdk, pinned; nothing is installed globally.
#
#   make synth            every environment's template into cdk.out/ (no AWS account needed)
#   make diff ENV=staging the stack against what is deployed (needs AWS credentials)
#   make deploy ENV=prod-ru
#   make lint-infra       cfn-lint and checkov on every environment's template
#
# The CLI runs in infra/, so it reads infra/cdk.json (the app command and
# the feature flags, which the app also reads itself). infra/ is its own Go
# module (infra/go.mod: the CDK bindings), built from the checkout beside it
# (a replace directive) so it reads the Lambdas' resource definition.
#
# infra/env/<env>.json is each environment's deploy configuration (origins,
# external API, alarm target, reservations, log retention, tracing, OIDC),
# checked before synthesis; every environment's file must be valid, since
# the app synthesizes them all (docs/deploy.md).
#
# CONVEYOR_FUNCTIONS_DIR (default bin) is where the stacks take
# <fn>/bootstrap from; `make build` writes them there. CDK_ARGS is passed to
# the CLI, e.g. CDK_ARGS='-c conveyor:staging:oauthClientSecretArn=arn:…'.

CDK_VERSION     := 2.1148.1
CDK_PREFIX      := $(CURDIR)/.cache/cdk
CDK             := $(CDK_PREFIX)/node_modules/.bin/cdk
CDK_ENVS        := staging prod-ru prod-en
CDK_APP         := $(or $(GO),go) run .
# No network calls the commands do not need: no notices feed, no telemetry.
CDK_FLAGS       := --app "$(CDK_APP)" --no-notices
# The CLI runs in infra/ (cdk.json); the functions and cdk.out stay at the top.
CDK_RUN         := cd infra && CONVEYOR_FUNCTIONS_DIR=$(abspath $(or $(CONVEYOR_FUNCTIONS_DIR),bin)) $(CDK)
CDK_OUT         := $(CURDIR)/cdk.out

# Template linters, in their own virtualenv under .venv (checkov pins an
# older boto3 than the emulator's moto), pinned in infra/lint/requirements.txt.
LINT_VENV       := $(CURDIR)/.venv/lint
CFN_LINT        := $(LINT_VENV)/bin/cfn-lint
CHECKOV         := $(LINT_VENV)/bin/checkov
LINT_OUT        := $(CURDIR)/.cache/lint

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: synth diff deploy cdk-cli lint-infra cdk-flags

ifneq ($(filter diff deploy,$(MAKECMDGOALS)),)
ifeq ($(filter $(ENV),$(CDK_ENVS)),)
$(error set ENV to one of: $(CDK_ENVS) (e.g. make $(filter diff deploy,$(MAKECMDGOALS)) ENV=staging))
endif
endif

cdk-cli: ## install the pinned CDK CLI (npm aws-cdk) into .cache/cdk
	@if [ "$$($(CDK) --version 2>/dev/null | cut -d' ' -f1)" != "$(CDK_VERSION)" ]; then \
		echo "installing aws-cdk@$(CDK_VERSION) into $(CDK_PREFIX)"; \
		mkdir -p $(CDK_PREFIX) && \
		npm install --prefix $(CDK_PREFIX) --no-audit --no-fund --loglevel=error aws-cdk@$(CDK_VERSION) >/dev/null || exit 1; \
	fi

synth: build cdk-cli ## write cdk.out/Conveyor-<env>.template.json for every environment
	$(CDK_RUN) synth $(CDK_FLAGS) $(CDK_ARGS) -o $(CDK_OUT) --quiet
	@for e in $(CDK_ENVS); do test -s cdk.out/Conveyor-$$e.template.json || { echo "missing cdk.out/Conveyor-$$e.template.json"; exit 1; }; done
	@echo "templates: $(foreach e,$(CDK_ENVS),cdk.out/Conveyor-$(e).template.json)"

diff: build cdk-cli ## compare ENV=<staging|prod-ru|prod-en> with its deployed stack
	$(CDK_RUN) diff $(CDK_FLAGS) $(CDK_ARGS) -o $(CDK_OUT) Conveyor-$(ENV)

deploy: build cdk-cli ## deploy ENV=<staging|prod-ru|prod-en> (the account must be `cdk bootstrap`ped)
	$(CDK_RUN) deploy $(CDK_FLAGS) $(CDK_ARGS) -o $(CDK_OUT) --require-approval broadening Conveyor-$(ENV)

$(CHECKOV): infra/lint/requirements.txt
	@echo "installing cfn-lint and checkov into $(LINT_VENV)"
	@$(or $(PYTHON),python3) -m venv $(LINT_VENV)
	@$(LINT_VENV)/bin/pip install --quiet --disable-pip-version-check -r infra/lint/requirements.txt
	@touch $(CHECKOV) $(CFN_LINT)

# The templates are synthesized by the app itself (no CLI, no build: the
# functions are empty placeholders, which changes only asset hashes).
lint-infra: $(CHECKOV) ## cfn-lint and checkov on every environment's template (skip lists in infra/lint/, each with its reason)
	@rm -rf $(LINT_OUT) && mkdir -p $(LINT_OUT)/fns
	@for f in $(FUNCTIONS); do mkdir -p $(LINT_OUT)/fns/$$f && : > $(LINT_OUT)/fns/$$f/bootstrap; done
	@echo "synthesizing $(CDK_ENVS) into $(LINT_OUT)/cdk.out"
	@cd infra && CDK_OUTDIR=$(LINT_OUT)/cdk.out CONVEYOR_FUNCTIONS_DIR=$(LINT_OUT)/fns $(or $(GO),go) run . >$(LINT_OUT)/synth.log 2>&1 \
		|| { grep -v '^!!' $(LINT_OUT)/synth.log; exit 1; }
	$(CFN_LINT) --config-file infra/lint/cfnlintrc.yaml -- $(foreach e,$(CDK_ENVS),$(LINT_OUT)/cdk.out/Conveyor-$(e).template.json)
	$(CHECKOV) --config-file infra/lint/checkov.yaml $(foreach e,$(CDK_ENVS),-f $(LINT_OUT)/cdk.out/Conveyor-$(e).template.json)

# infra/cdk.json's context is the recommended feature flags of the pinned
# aws-cdk-lib (TestCDKJSONHoldsTheRecommendedFlags checks it); after a
# version bump this rewrites it from the module's own cx-api.
cdk-flags: ## rewrite infra/cdk.json's flags from the pinned aws-cdk-lib's recommended list
	@d=$$(mktemp -d) && tar -xzf $$(cd infra && $(or $(GO),go) list -m -f '{{.Dir}}' github.com/aws/aws-cdk-go/awscdk/v2)/jsii/aws-cdk-lib-*.tgz -C $$d package/cx-api/lib \
		&& node infra/lint/cdk-flags.js $$d/package/cx-api/lib/features.js infra/cdk.json; rc=$$?; rm -rf $$d; exit $$rc

# IAM conformance (docs/iam.md): every function's AWS requests, recorded
# while the functions' binaries run a scenario on the local stack, held
# against its role in every environment's synthesized template by a real
# policy evaluator (npm @cloud-copilot/iam-simulate, pinned, installed into
# .cache/iam-simulate); every granted action used or listed with its
# reason in infra/iam/unexercised.yaml; every SDK operation a function's
# code can reach (a static call graph from its main, about a minute of
# CPU: only here) allowed or listed with its reason in
# infra/iam/reachable.yaml (TestReachReportsADeniedUnrecordedCall shows
# the check on a fixture); and every request an AWS service makes for
# the stack (CloudWatch, Scheduler, S3, EventBridge, Lambda) held against
# the resource, key and trust policies it needs
# (TestServicesMayUseTheStacksResources). `make test` runs it.
IAM_SIMULATE_VERSION := 0.1.173
IAM_SIMULATE_PREFIX  := $(CURDIR)/.cache/iam-simulate
IAM_OUT              := $(CURDIR)/.cache/iam

.PHONY: iam iam-simulate

iam-simulate: ## install the pinned IAM policy evaluator (npm @cloud-copilot/iam-simulate) into .cache/iam-simulate
	@if [ "$$(node -p 'require(process.argv[1]).version' $(IAM_SIMULATE_PREFIX)/node_modules/@cloud-copilot/iam-simulate/package.json 2>/dev/null)" != "$(IAM_SIMULATE_VERSION)" ]; then \
		echo "installing @cloud-copilot/iam-simulate@$(IAM_SIMULATE_VERSION) into $(IAM_SIMULATE_PREFIX)"; \
		mkdir -p $(IAM_SIMULATE_PREFIX) && \
		npm install --prefix $(IAM_SIMULATE_PREFIX) --no-audit --no-fund --loglevel=error @cloud-copilot/iam-simulate@$(IAM_SIMULATE_VERSION) >/dev/null || exit 1; \
	fi

# The templates are synthesized by the app itself, as for lint-infra.
iam: $(EMULATORS) iam-simulate ## IAM conformance: the functions' recorded AWS requests against their roles in the synthesized templates
	@rm -rf $(IAM_OUT) && mkdir -p $(IAM_OUT)/fns
	@for f in $(FUNCTIONS); do mkdir -p $(IAM_OUT)/fns/$$f && : > $(IAM_OUT)/fns/$$f/bootstrap; done
	@echo "synthesizing $(CDK_ENVS) into $(IAM_OUT)/cdk.out"
	@cd infra && CDK_OUTDIR=$(IAM_OUT)/cdk.out CONVEYOR_FUNCTIONS_DIR=$(IAM_OUT)/fns $(or $(GO),go) run . >$(IAM_OUT)/synth.log 2>&1 \
		|| { grep -v '^!!' $(IAM_OUT)/synth.log; exit 1; }
	CONVEYOR_IAM_TEMPLATES=$(IAM_OUT)/cdk.out IAM_SIMULATE_MODULES=$(IAM_SIMULATE_PREFIX)/node_modules \
		$(or $(GO),go) test -count=1 -timeout 10m -run 'TestIAMConformance|TestServicesMayUseTheStacksResources|TestReachReportsADeniedUnrecordedCall' -v ./localstack/iamcheck/ 2>&1 \
		| grep -Ev '^ {8}\{' ; exit $${PIPESTATUS[0]}
