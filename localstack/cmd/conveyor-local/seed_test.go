package main

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/conveyor/conveyor/internal/admin"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/stack"
)

func TestMain(m *testing.M) { awstest.Main(m) }

// TestSeedFillsTheStackWithEveryShape: seed submits the jobs it is asked
// for, through the API of the stack its environment names, spread over
// its owners and of every shape (publish and http, scheduled and
// cancelled among them); without that environment it says what to source.
func TestSeedFillsTheStackWithEveryShape(t *testing.T) {
	t.Parallel()
	if code := seed(nil, func(string) string { return "" }, io.Discard); code != 2 {
		t.Errorf("seed without the stack's environment: status %d, want 2", code)
	}
	b := awstest.Setup(t, nil, stack.Options{})
	env := b.Stack.Env()
	var out strings.Builder
	if code := seed([]string{"-jobs", "20", "-users", "2", "-concurrency", "4"}, func(k string) string { return env[k] }, &out); code != 0 {
		t.Fatalf("seed: status %d: %s", code, &out)
	}
	ops := b.Client(b.Token("op-seed", "admin", ""))
	count := func(q admin.SearchRequest) int {
		zero := 0
		q.Limit = &zero
		p, err := ops.SearchJobs(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		return p.Total
	}
	for _, c := range []struct {
		q    admin.SearchRequest
		want int
	}{
		{admin.SearchRequest{Owner: "seed-00"}, 10}, {admin.SearchRequest{Owner: "seed-01"}, 10},
		{admin.SearchRequest{Type: "http"}, 8}, {admin.SearchRequest{Type: "publish"}, 12},
		{admin.SearchRequest{Status: "scheduled"}, 2}, {admin.SearchRequest{Status: "cancelled"}, 2},
	} {
		if got := count(c.q); got != c.want {
			t.Errorf("jobs matching %+v: %d, want %d", c.q, got, c.want)
		}
	}
	if !strings.Contains(out.String(), "seed: 20 jobs over 2 owners") {
		t.Errorf("seed's report: %q", &out)
	}
}
