# Infrastructure targets, included by the top-level Makefile
# (`-include infra/make.mk`). The CDK CLI is installed from npm into
# .cache/cdk, pinned; nothing is installed globally.
#
#   make synth            every environment's template into cdk.out/ (no AWS account needed)
#   make diff ENV=staging the stack against what is deployed (needs AWS credentials)
#   make deploy ENV=prod-ru
#
# CONVEYOR_FUNCTIONS_DIR (default bin) is where the stacks take
# <fn>/bootstrap from; `make build` writes them there. CDK_ARGS is passed to
# the CLI, e.g. CDK_ARGS='-c conveyor:staging:oauthClientSecretArn=arn:…'.

CDK_VERSION     := 2.1148.1
CDK_PREFIX      := .cache/cdk
CDK             := $(CDK_PREFIX)/node_modules/.bin/cdk
CDK_ENVS        := staging prod-ru prod-en
CDK_APP         := $(or $(GO),go) run ./infra
# No network calls the commands do not need: no notices feed, no telemetry.
CDK_FLAGS       := --app "$(CDK_APP)" --no-notices

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: synth diff deploy cdk-cli

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
	$(CDK) synth $(CDK_FLAGS) $(CDK_ARGS) -o cdk.out --quiet
	@for e in $(CDK_ENVS); do test -s cdk.out/Conveyor-$$e.template.json || { echo "missing cdk.out/Conveyor-$$e.template.json"; exit 1; }; done
	@echo "templates: $(foreach e,$(CDK_ENVS),cdk.out/Conveyor-$(e).template.json)"

diff: build cdk-cli ## compare ENV=<staging|prod-ru|prod-en> with its deployed stack
	$(CDK) diff $(CDK_FLAGS) $(CDK_ARGS) -o cdk.out Conveyor-$(ENV)

deploy: build cdk-cli ## deploy ENV=<staging|prod-ru|prod-en> (the account must be `cdk bootstrap`ped)
	$(CDK) deploy $(CDK_FLAGS) $(CDK_ARGS) -o cdk.out --require-approval broadening Conveyor-$(ENV)
