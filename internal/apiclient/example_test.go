package apiclient_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/conveyor/conveyor/internal/accounts"
	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/internal/apiclient"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/job"
	"github.com/conveyor/conveyor/internal/publish"
)

// The whole client path of a job: connect the account, upload (sign, PUT
// straight to S3, confirm), submit, wait. Against `make run`, with the
// environment of .local/env and a token from `conveyor token`.
func Example() {
	ctx := context.Background()
	c := apiclient.New(os.Getenv("CONVEYOR_API_URL"), apiclient.WithToken(os.Getenv("TOKEN")))

	if err := c.Connect(ctx, accounts.ConnectRequest{Provider: "deviantart", RefreshToken: "my-refresh-token"}); err != nil {
		log.Fatal(err)
	}
	png, err := os.ReadFile("cat.png")
	if err != nil {
		log.Fatal(err)
	}
	up, err := c.Upload(ctx, "cat.png", "image/png", png)
	if err != nil {
		log.Fatal(err)
	}
	j, created, err := c.SubmitJob(ctx, apiclient.PublishRequest(publish.Params{Title: "A cat"}, up.ID))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.ID, "created:", created) // false (200): the same job is already active
	j, err = c.WaitJob(ctx, j.ID, 500*time.Millisecond, func(j job.Job) bool { return j.Status.Finished() })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(j.Status, string(j.Result))
}

// An answer outside 2xx is an *apiclient.APIError: the status, the
// contract's code, message and field, Retry-After and the request id to
// quote. It unwraps to the services' *invalid.FieldError when the answer
// names a field, so invalid.As reads it as the server's code wrote it.
func ExampleAPIError() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Request-Id", "req_1")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":{"code":"invalid_request","message":"params.title is required","field":"params.title"}}`)
	}))
	defer api.Close()

	c := apiclient.New(api.URL, apiclient.WithToken("a-token"))
	_, _, err := c.SubmitJob(context.Background(), apiclient.PublishRequest(publish.Params{}, "upl_1"))
	fmt.Println(err)
	fmt.Println("status:", apiclient.StatusOf(err))
	if fe, ok := invalid.As(err); ok {
		fmt.Println("field:", fe.Field)
	}
	// Output:
	// 400 invalid_request: params.title is required
	// status: 400
	// field: params.title
}

// A bulk stop by filter: the jobs stopped inside the request, or, when
// more match than the API acts on there, the operation it started in the
// background, followed to its end with its progress.
func ExampleClient_WaitOperation() {
	ctx := context.Background()
	c := apiclient.New(os.Getenv("CONVEYOR_API_URL"), apiclient.WithToken(os.Getenv("ADMIN_TOKEN")))

	stopped, op, err := c.StopMatching(ctx, apiclient.BulkFilter{Filter: admin.Filter{Status: "queued", Tier: "low"}})
	if err != nil {
		log.Fatal(err)
	}
	if op == nil {
		fmt.Println(len(stopped.Stopped), "stopped,", len(stopped.Skipped), "skipped")
		return
	}
	final, err := c.WaitOperation(ctx, op.ID, time.Second, func(o admin.Operation) {
		fmt.Fprintf(os.Stderr, "%s: %d/%d done (%d%%)\n", o.ID, o.Done, o.Matched, o.Progress)
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(final.Status, final.Done, "stopped,", final.Skipped)
}
