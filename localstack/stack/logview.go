package stack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// LogView renders the JSON log lines the functions and the local runtime
// write (log/slog's JSON, as CloudWatch Logs receives it) for a person at a
// terminal: local time, level, the function's name, the message, then the
// other fields as key=value. A line that is not a JSON object passes
// through as it is, prefixed by the function's name. Lines are written
// whole, one at a time, whatever writes them: the output of many functions
// interleaves by lines, never inside one.
type LogView struct {
	mu    sync.Mutex
	out   io.Writer
	color bool
}

// NewLogView writes to out; color adds ANSI colours to the level and the
// function's name.
func NewLogView(out io.Writer, color bool) *LogView { return &LogView{out: out, color: color} }

// For returns the writer of one function's (or the runtime's) lines.
func (v *LogView) For(name string) io.Writer { return &logSource{view: v, name: name} }

type logSource struct {
	view *LogView
	name string
	mu   sync.Mutex
	buf  []byte
}

func (s *logSource) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = append(s.buf, p...)
	for {
		i := bytes.IndexByte(s.buf, '\n')
		if i < 0 {
			break
		}
		line := s.buf[:i]
		s.view.line(s.name, line)
		s.buf = s.buf[i+1:]
	}
	return len(p), nil
}

// line renders one line.
func (v *LogView) line(name string, raw []byte) {
	text := v.render(name, bytes.TrimRight(raw, "\r"))
	v.mu.Lock()
	defer v.mu.Unlock()
	_, _ = io.WriteString(v.out, text+"\n")
}

// Fields every line has, shown in their own columns.
const (
	logTime  = "time"
	logLevel = "level"
	logMsg   = "msg"
)

func (v *LogView) render(name string, raw []byte) string {
	var rec map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if len(raw) == 0 || raw[0] != '{' || dec.Decode(&rec) != nil {
		return v.paint(name, "") + " " + string(raw)
	}
	at := ""
	if s, ok := rec[logTime].(string); ok {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			at = t.Local().Format("15:04:05.000")
		}
	}
	level, _ := rec[logLevel].(string)
	msg, _ := rec[logMsg].(string)
	keys := make([]string, 0, len(rec))
	for k := range rec {
		if k != logTime && k != logLevel && k != logMsg {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	if at != "" {
		b.WriteString(at + " ")
	}
	b.WriteString(v.level(level))
	b.WriteString(" " + v.paint(name, level) + " " + msg)
	for _, k := range keys {
		b.WriteString(" " + k + "=" + value(rec[k]))
	}
	return b.String()
}

// value renders a field's value: strings bare unless they hold a space or
// are empty, everything else as JSON.
func value(x any) string {
	if s, ok := x.(string); ok {
		if s == "" || strings.ContainsAny(s, " \t\"=") {
			q, _ := json.Marshal(s)
			return string(q)
		}
		return s
	}
	b, err := json.Marshal(x)
	if err != nil {
		return fmt.Sprint(x)
	}
	return string(b)
}

const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

func (v *LogView) level(level string) string {
	l := fmt.Sprintf("%-5s", level)
	if !v.color {
		return l
	}
	switch level {
	case "ERROR":
		return ansiRed + l + ansiReset
	case "WARN":
		return ansiYellow + l + ansiReset
	case "DEBUG":
		return ansiDim + l + ansiReset
	}
	return l
}

func (v *LogView) paint(name, _ string) string {
	tag := "[" + name + "]"
	if !v.color {
		return tag
	}
	return ansiCyan + tag + ansiReset
}
