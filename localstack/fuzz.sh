#!/usr/bin/env bash
# make fuzz: schemathesis (pinned in fuzz.requirements.txt) with every check
# against a private local stack (its own ports and working directory, so a
# running `make run` and its .local/env are left alone), with an admin JWT
# minted by the CLI. Prints schemathesis' report; exits with its status.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/conveyor-fuzz-XXXXXX")
port=${FUZZ_PORT:-18480}
sim=${FUZZ_SIM_PORT:-18481}
pid=""
cleanup() { [ -n "$pid" ] && kill -TERM -- "-$pid" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
cd "$repo"
go build -o "$work/conveyor-local" ./localstack/cmd/conveyor-local
go build -o "$work/conveyor" ./cmd/conveyor
cd "$work"
# The stack runs outside the repository (its own .local/env), so name the
# emulators the Makefile installed: moto by the Python of its .venv, so that
# it runs with the repository's patches (localstack/emulator/moto_server.py;
# stock moto_server spins a core per long poll on a FIFO queue whose
# messages wait behind a group in flight, and a seeded stack's requests then
# outlast schemathesis' 10 s). The fuzzer hammers with one token: its stack
# runs under stack.RateLimitsForLoad, not the per-owner rate.
CONVEYOR_MOTO_PYTHON="$repo/.venv/bin/python" CONVEYOR_DYNAMODB_LOCAL="$repo/.cache/dynamodb-local" CONVEYOR_DYNOXIDE="$repo/.cache/dynoxide" \
CONVEYOR_RATE_LIMITS=free=10000/100000,standard=10000/100000,pro=10000/100000,corporate=10000/100000,enterprise=10000/100000 \
CONVEYOR_API_ADDR=127.0.0.1:$port CONVEYOR_SIMULATOR_ADDR=127.0.0.1:$sim CONVEYOR_STREAM_TIMEOUT=${FUZZ_STREAM_TIMEOUT:-2s} setsid ./conveyor-local -in-process >stack.log 2>&1 &
pid=$!
for _ in $(seq 1 180); do [ -f .local/env ] && break; sleep 1; done
[ -f .local/env ] || { tail -30 stack.log; echo "the stack did not start" >&2; exit 1; }
set -a; . ./.local/env; set +a
token=$(./conveyor token --sub fuzz-admin --role admin --ttl 1h)
# FUZZ_SEED_JOBS (make fuzz SEED_JOBS=2000): the stack holds that many jobs
# of every kind and shape first, so every list, search, count and stored
# document schemathesis reads is checked against the spec at that size.
if [ "${FUZZ_SEED_JOBS:-0}" -gt 0 ]; then
  ./conveyor-local seed -jobs "$FUZZ_SEED_JOBS"
fi
# Every check, every operation (the event streams included: the stack's
# stream function URL times out after CONVEYOR_STREAM_TIMEOUT, and a stream
# ends cleanly before it, so each answer is whole); nothing filtered.
# localstack/schemathesis.toml says why 422 is an acceptable answer to a
# request the schema allows, and 413 to one it forbids.
"$repo/.venv/bin/schemathesis" --config-file "$repo/localstack/schemathesis.toml" run "$repo/openapi.yaml" --url "$CONVEYOR_API_URL" \
  -H "Authorization: Bearer $token" --checks all --max-examples "${FUZZ_EXAMPLES:-20}" "$@"
