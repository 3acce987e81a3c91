// Package handler is every deployed function's handler and wiring, one
// file per function (api.go, admin.go, uploads.go, schedules.go,
// confirm.go, publisher.go, system.go, recovery.go, relay.go, stream.go),
// each giving its function as a Function: its name, what it reads at cold
// start, and how its handler is built from the environment (Env) with only
// the clients it calls. Beside them, what they are built from: the
// environment a function reads at cold start (env.go), the SQS batch rules
// the queue consumers share (sqs.go), the HTTP functions' router and
// Idempotency-Key guard (http.go), the half of the pipeline that submits
// jobs and the one list of the built-in kinds (pipeline.go), the half that
// runs them (runner.go), the functions' CloudWatch metrics as Embedded
// Metric Format log lines (metrics.go), and the whole graph at once for the local stack and
// the tests (App, app.go; every function by name, functions.go).
//
// A function's main (functions/<name>) is Start(itsFunction); the local
// runtime, `make invoke` and the tests call exactly what Lambda calls.
// Every binary links this whole package, and with it every AWS service
// client any function's wiring imports: a cold start pays those packages'
// inits, not their calls (docs/performance.md, "Bootstraps and cold start";
// links_test.go holds what each function links).
package handler
