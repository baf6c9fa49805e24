package main

// atrl check: the plugin's verdict on a configuration file without a
// gateway, Redis or a WASM build (config.ParseDocument, what the plugin
// runs when it starts), in milliseconds.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

func checkHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl check -config FILE

Checks a plugin configuration as the plugin does when the gateway starts
it, without a gateway or Redis: the whole document the gateway hands the
plugin (the global configuration and the rules under _rules_), YAML, or
JSON when FILE ends in .json.

A configuration the plugin takes prints one line per configuration in it,
and the exit status is 0:

  plugin.yaml: ok: rule "chat" limits limit_by_per_api_key (1 key); Redis redis.static (may be a Redis Cluster, redis.timeout 1000 ms)

followed by a note for each pair of rule items that read the same value
(the plugin logs them when it starts): a value both match is limited by
both, or, for two items of one type, counted once at the tighter limits.

One the plugin refuses prints the line the plugin logs, saying where and
what is wrong, and the exit status is 2, as for a file that cannot be read
or is not YAML:

  plugin.yaml: configuration refused: rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0
`)
}

// runCheck is `atrl check`.
func runCheck(args []string, s streams) int {
	fs := flag.NewFlagSet("atrl check", flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() { checkHelp(s.stderr) }
	path := fs.String("config", "", "the plugin configuration `FILE` (required)")
	rest, status, ok := parseArgs(fs, args)
	switch {
	case !ok:
		return status
	case len(rest) > 0:
		return unexpectedArg(fs, s, rest[0])
	case *path == "":
		fmt.Fprintln(s.stderr, "atrl check: -config is required: the plugin configuration file to check")
		return exitBadArgs
	}
	doc, err := readDocument(*path)
	if err != nil {
		fmt.Fprintf(s.stderr, "atrl check: %v\n", err)
		return exitBadArgs
	}
	d, err := config.ParseDocument(doc)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %s\n", *path, config.Refusal(err))
		return exitBadArgs
	}
	if d.Global != nil {
		fmt.Fprintf(s.stdout, "%s: ok: %s\n", *path, describeConfig(d.Global))
		writeOverlaps(s.stdout, *path+": note: ", d.Global)
	}
	for i, r := range d.Rules {
		fmt.Fprintf(s.stdout, "%s: ok: %s[%d] (%s): %s\n", *path, config.RulesKey, i, describeMatch(r), describeConfig(r.Config))
		writeOverlaps(s.stdout, fmt.Sprintf("%s: note: %s[%d]: ", *path, config.RulesKey, i), r.Config)
	}
	return exitOK
}

// writeOverlaps prints a line per pair of rule items that read the same
// value (config.Config.Overlaps), and one per fallback that has fallbacks of
// its own (config.Config.FallbackNotes), as the plugin logs them when it
// starts.
func writeOverlaps(w io.Writer, prefix string, c *config.Config) {
	for _, o := range c.Overlaps() {
		fmt.Fprintf(w, "%s%s\n", prefix, o.Text)
	}
	for _, note := range c.FallbackNotes() {
		fmt.Fprintf(w, "%s%s\n", prefix, note)
	}
}

// readDocument reads a configuration file as the gateway would hand it to
// the plugin: a .json file as it is, any other file as YAML converted to
// JSON, as loadConfig reads it.
func readDocument(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is said once, below
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	if strings.EqualFold(filepath.Ext(path), ".json") {
		return raw, nil
	}
	js, err := yamlToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []byte(js), nil
}

// describeConfig says in a few words what a configuration limits: its
// rule, and its threshold or rule items.
func describeConfig(c *config.Config) string {
	var limits []string
	if c.Global != nil {
		limits = append(limits, "every request (global_threshold)")
	}
	for _, item := range c.Items {
		limits = append(limits, item.Describe()+" ("+strconv.Itoa(len(item.Keys))+" "+plural(int64(len(item.Keys)), "key")+")")
	}
	if c.Unmatched != nil {
		limits = append(limits, "the requests no rule item matches (unmatched_threshold)")
	}
	// redis.cluster says what the plugin allows for, not what runs there:
	// true works on one server too (make run's), each call kept to a slot.
	redis := "may be a Redis Cluster"
	if !c.Redis.Cluster {
		redis = "one Redis server"
	}
	fallbacks := ""
	for i, f := range c.Fallbacks {
		if i == 0 {
			fallbacks = "; when a model has no room, serves "
		} else {
			fallbacks += ", "
		}
		fallbacks += f.Key + " as " + strings.Join(f.Models, " or ")
	}
	return "rule " + strconv.Quote(c.RuleName) + " limits " + strings.Join(limits, ", ") + fallbacks + "; Redis " + c.Redis.ServiceName +
		" (" + redis + ", redis.timeout " + strconv.FormatInt(c.Redis.TimeoutMs, 10) + " ms)"
}

// describeMatch says what requests a rule of _rules_ applies to.
func describeMatch(r config.DocumentRule) string {
	var parts []string
	for _, m := range []struct {
		what  string
		names []string
	}{{"route", r.Routes}, {"domain", r.Domains}, {"service", r.Services}, {"route prefix", r.RoutePrefixes}} {
		if len(m.names) > 0 {
			parts = append(parts, m.what+" "+strings.Join(m.names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
