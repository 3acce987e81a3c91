package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpListsEveryCommand: help is on stdout with status 0 and names
// every subcommand; an unknown one is refused with status 2 on stderr.
func TestHelpListsEveryCommand(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"help", "-h", "--help"} {
		var out, errOut bytes.Buffer
		if code := dispatch([]string{arg}, &out, &errOut); code != 0 || errOut.Len() != 0 {
			t.Errorf("%s: status %d, stderr %q; want 0 and nothing", arg, code, &errOut)
		}
		for _, c := range commands {
			if !strings.Contains(out.String(), "\n  "+c.name+" ") {
				t.Errorf("%s: the help does not list %s:\n%s", arg, c.name, &out)
			}
		}
	}
	var out, errOut bytes.Buffer
	if code := dispatch([]string{"nope"}, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), `unknown command "nope"`) || out.Len() != 0 {
		t.Errorf("an unknown command: status %d, stdout %q, stderr %q; want 2 and the refusal on stderr", code, &out, &errOut)
	}
}

// TestEachCommandParsesItsOwnFlags: every subcommand answers -h with
// status 0 and refuses a flag it does not have with status 2, before it
// starts anything.
func TestEachCommandParsesItsOwnFlags(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		if code := c.run([]string{"-h"}); code != 0 {
			t.Errorf("%s -h: status %d, want 0", c.name, code)
		}
		if code := c.run([]string{"-no-such-flag"}); code != 2 {
			t.Errorf("%s -no-such-flag: status %d, want 2", c.name, code)
		}
	}
}
