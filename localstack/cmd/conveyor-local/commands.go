package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// A command is one of conveyor-local's subcommands.
type command struct {
	name string
	// summary is its line in the help.
	summary string
	// run does it with the arguments after its name and returns the exit
	// status.
	run func(args []string) int
}

// commands are the subcommands, in the help's order; run is the default.
var commands = []command{
	{"run", "the whole stack on localhost until Ctrl-C (make run; the default)", runStack},
	{"chaos", "many jobs through a private stack while workers die, messages repeat and the API fails (make chaos)", runChaos},
	{"invoke", "a sample event to one function against the running stack (make invoke)", runInvoke},
	{"simulator", "the external-API simulator on its own", runSimulator},
	{"seed", "thousands of jobs of every kind and shape into the running stack (make fuzz SEED_JOBS=…)", runSeed},
	{"shape", "figures of the code's shape: long functions, packages without tests (make shape)", runShape},
	{"with-emulators", "one moto and one DynamoDB Local around a command, stopped when it ends (make test)", runWithEmulators},
}

func main() { os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr)) }

// dispatch runs the subcommand args name (run when args start with a flag
// or are empty) and returns its exit status; help goes to stdout with
// status 0, an unknown command to stderr with status 2.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !slices.Contains([]string{"-h", "-help", "--help"}, args[0]) {
		return runStack(args)
	}
	if slices.Contains([]string{"help", "-h", "-help", "--help"}, args[0]) {
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(stderr, "conveyor-local: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// usage lists the subcommands.
func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: conveyor-local [command] [flags]")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\n`conveyor-local COMMAND -h` lists a command's flags.")
}

// parse parses a subcommand's args into fs. -h prints the command's flags
// on stdout and ends it with status 0; a bad flag prints the error and the
// flags on stderr and ends it with status 2; done is false when the command
// is to go on.
func parse(fs *flag.FlagSet, args []string) (code int, done bool) {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		printFlags(os.Stdout, fs)
		return 0, true
	default:
		fmt.Fprintf(os.Stderr, "conveyor-local %s: %v\n", fs.Name(), err)
		printFlags(os.Stderr, fs)
		return 2, true
	}
}

// printFlags writes fs's usage line and flags to w.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: conveyor-local %s [flags]\n", fs.Name())
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
