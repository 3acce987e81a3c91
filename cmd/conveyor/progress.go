package main

import (
	"fmt"
	"strings"
)

// bar is a progress bar on stderr, redrawn in place with \r. It draws only
// when stderr is a terminal: in a pipe or a log file, it writes nothing
// (the command's result on stdout says what was done).
type bar struct {
	c     *cli
	label string
	total int
	done  int
	drawn bool
}

const barWidth = 30

func (c *cli) progress(label string, total int) *bar {
	b := &bar{c: c, label: label, total: total}
	b.draw()
	return b
}

// set moves the bar to n (clamped to the total).
func (b *bar) set(n int) {
	b.done = n
	b.draw()
}

func (b *bar) draw() {
	if !b.c.tty {
		return
	}
	total := max(b.total, b.done)
	filled := barWidth
	pct := 100
	if total > 0 {
		filled = barWidth * b.done / total
		pct = 100 * b.done / total
	}
	fmt.Fprintf(b.c.stderr, "\r%s [%s%s] %d/%d %3d%%", b.label, strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), b.done, total, pct)
	b.drawn = true
}

// finish ends the bar's line.
func (b *bar) finish() {
	if b.drawn {
		fmt.Fprintln(b.c.stderr)
		b.drawn = false
	}
}
