// Package handler holds what every function's handler is built from: the
// environment a function reads at cold start (Env) and the SQS batch rules
// the queue consumers share (ConsumeFIFO, Delay). Each function has its own
// package beside it, named for the function (apifn, adminfn, uploadsfn,
// schedulesfn, confirmfn, publisherfn, systemfn, recoveryfn, relayfn,
// streamfn), holding its trigger's handler
// and the wiring of exactly the clients and services it uses: Go links by
// package, so one package per function is what keeps each bootstrap free of
// the others' AWS clients. The functions' main packages, `make invoke`
// (internal/app.Functions) and the local runtime call exactly these.
package handler
