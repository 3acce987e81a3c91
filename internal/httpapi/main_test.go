package httpapi_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestMain runs the tests against the emulators and then checks that no
// goroutine of ours is left. The emulator-backed route tests build SDK and
// API clients of their own; their pooled keep-alive connections (a
// persistConn's read and write loops) may still be open at the end and are
// not leaks of the code under test.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(awstest.Wrap(m),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}
