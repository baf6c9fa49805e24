// Command atrl is the operators' tool for the ai-token-ratelimit plugin.
//
//	atrl check -config FILE
//
// checks a plugin configuration as the plugin does when it starts.
//
//	atrl usage [-config FILE] [-model NAME] FILE...
//
// prints, for each saved response body, the usage the plugin reads from it
// and what the plugin charges for it.
//
//	atrl status|reset|grant -config FILE (-rule-item N -value V | -threshold T) ...
//	atrl override set|rm|list -config FILE ...
//	atrl top -config FILE [-n 10]
//
// read and manage the subjects' quota in the plugin's Redis, as the admin
// API does.
//
//	atrl exporter -config FILE [-listen 127.0.0.1:9464]
//
// serves the subjects' budgets, read from Redis at each scrape, as
// Prometheus metrics. FILE is a configuration (YAML, or JSON when it ends in .json)
// or a Higress WasmPlugin manifest, read by package internal/configfile, as
// make run's local gateway reads it. Run `atrl help` for the commands and
// `atrl help <command>` for one command's flags.
package main

import (
	"fmt"
	"io"
	"os"
)

// Exit statuses.
const (
	exitOK      = 0 // everything done
	exitFailed  = 1 // the command ran, but some of its work failed (a file could not be read, Redis failed)
	exitBadArgs = 2 // the command could not start: unknown command, bad flags or configuration
)

// command is one subcommand of atrl.
type command struct {
	name    string
	summary string // one line, for `atrl help`
	// run runs the command with the arguments that follow its name.
	run func(args []string, s streams) int
	// help writes the command's usage text.
	help func(w io.Writer)
}

// streams are the standard streams a command reads and writes.
type streams struct {
	stdin          io.Reader
	stdout, stderr io.Writer
}

// commands lists the subcommands, in the order `atrl help` shows them.
var commands = []command{
	{name: "check", summary: "check a plugin configuration as the plugin does when it starts", run: runCheck, help: checkHelp},
	{name: "usage", summary: "print the usage the plugin reads from saved response bodies, and their cost", run: runUsage, help: usageHelp},
	{name: "status", summary: "print a subject's limits and what it used, from Redis", run: runStatus, help: statusHelp},
	{name: "reset", summary: "clear a subject's windows", run: runReset, help: resetHelp},
	{name: "grant", summary: "give tokens back to a subject", run: runGrant, help: grantHelp},
	{name: "override", summary: "set, remove or list a subject's limit overrides", run: runOverride, help: overrideHelp},
	{name: "top", summary: "list the subjects closest to their limits", run: runTop, help: topHelp},
	{name: "exporter", summary: "serve the subjects' budgets from Redis as Prometheus metrics", run: runExporter, help: exporterHelp},
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run is atrl with these arguments (without the program name) and streams;
// it returns the exit status.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		help(stderr)
		return exitBadArgs
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			help(stdout)
			return exitOK
		}
		if len(rest) > 1 {
			fmt.Fprintln(stderr, "atrl help: takes at most one command")
			return exitBadArgs
		}
		c := lookup(rest[0])
		if c == nil {
			fmt.Fprintf(stderr, "atrl help: unknown command %q; run 'atrl help' for the commands\n", rest[0])
			return exitBadArgs
		}
		c.help(stdout)
		return exitOK
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(stderr, "atrl: unknown command %q; run 'atrl help' for the commands\n", name)
		return exitBadArgs
	}
	return c.run(rest, streams{stdin, stdout, stderr})
}

// lookup returns the command of that name, or nil.
func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// help writes atrl's usage text.
func help(w io.Writer) {
	fmt.Fprint(w, "atrl is the operators' tool for the ai-token-ratelimit plugin.\n\n"+
		"Usage:\n\n\tatrl <command> [arguments]\n\nCommands:\n\n")
	for _, c := range commands {
		fmt.Fprintf(w, "\t%-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'atrl help <command>' for a command's flags.\n")
}
