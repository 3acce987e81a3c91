package secretref

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// answer is what a read under test returns.
type answer struct {
	value []byte
	err   error
}

// TestDeferred: the read starts when the Deferred is made; a Get whose
// context ends returns at once and leaves the read going; a failed read
// is not kept (the next Get reads again); a value is kept and shared by
// every later Get without another read. Each read is released by the test
// through a channel: no timing decides anything.
func TestDeferred(t *testing.T) {
	t.Parallel()
	var reads atomic.Int32
	pending := make(chan chan answer)
	d := NewDeferred(func(context.Context) ([]byte, error) {
		reads.Add(1)
		reply := make(chan answer)
		pending <- reply
		a := <-reply
		return a.value, a.err
	})
	first := <-pending // started by NewDeferred, before any Get

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d.Get(ended); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get with an ended context while the read is pending: %v, want context.Canceled", err)
	}

	boom := errors.New("reading secret arn:jwt: throttled")
	d.mu.Lock()
	a1 := d.cur
	d.mu.Unlock()
	first <- answer{err: boom}
	<-a1.done

	got := make(chan answer, 4)
	get := func() {
		v, err := d.Get(context.Background())
		got <- answer{v, err}
	}
	go get()
	second := <-pending // the failure was not kept: a new read
	var wg sync.WaitGroup
	for range 3 { // more callers while the second read is pending, or after it
		wg.Go(get)
	}
	second <- answer{value: []byte("k3y")}
	wg.Wait()
	for range 4 {
		if a := <-got; a.err != nil || !bytes.Equal(a.value, []byte("k3y")) {
			t.Errorf("Get after the second read: %q, %v", a.value, a.err)
		}
	}
	if v, err := d.Get(context.Background()); err != nil || string(v) != "k3y" {
		t.Errorf("Get once the value is known: %q, %v", v, err)
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2 (one failed, one kept)", n)
	}
}
