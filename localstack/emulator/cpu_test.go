package emulator

import (
	"crypto/sha256"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestProcCPUTime reads a process's processor time from /proc: this test
// process's grows while it works.
func TestProcCPUTime(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	before, err := procCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(nil)
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		sum = sha256.Sum256(sum[:])
	}
	after, err := procCPUTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time %v then %v after 300 ms of hashing: want it to grow", before, after)
	}
	if _, err := procCPUTime(1 << 30); err == nil {
		t.Error("a process that does not exist: no error")
	}
}
