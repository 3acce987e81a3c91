#!/bin/sh
# LocalStack init hook: say that the emulator is ready. Conveyor's resources
# are provisioned by `make run` (localstack/provision) from the one resource
# definition, so that LocalStack, moto and the CDK stacks cannot drift.
echo "LocalStack ready for Conveyor: run AWS_ENDPOINT_URL=http://127.0.0.1:4566 make run"
