// Command invoke feeds a sample event to one function's handler, in
// process, against the running local stack — the way Lambda would invoke
// it: `make invoke FN=api EVENT=events/api-healthz.json` (after `make run`;
// it reads .local/env).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/conveyor/conveyor/internal/app"
)

func main() {
	fn := flag.String("fn", "", "function: api, confirm, publisher or recovery")
	event := flag.String("event", "", "path of the event JSON")
	flag.Parse()
	payload, err := os.ReadFile(*event)
	if err != nil {
		fail(err)
	}
	ctx := context.Background()
	a, err := app.FromEnv(ctx, *fn)
	if err != nil {
		fail(fmt.Errorf("%w (run `make run` first; invoke reads .local/env)", err))
	}
	var h lambda.Handler
	switch *fn {
	case "api":
		h = lambda.NewHandler(a.APIHandler())
	case "confirm":
		h = lambda.NewHandler(a.ConfirmHandler())
	case "publisher":
		h = lambda.NewHandler(a.PublisherHandler())
	case "recovery":
		h = lambda.NewHandler(a.RecoveryHandler())
	default:
		fail(fmt.Errorf("unknown function %q (api, confirm, publisher, recovery)", *fn))
	}
	out, err := h.Invoke(ctx, payload)
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "invoke: %v\n", err)
	os.Exit(1)
}
