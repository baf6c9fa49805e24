package main

// atrl check: the plugin's verdict on a configuration file without a
// gateway, Redis or a WASM build (config.ParseDocument, what the plugin
// runs when it starts), in milliseconds.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
)

func checkHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl check -config FILE [-model NAME]...

Checks a plugin configuration as the plugin does when the gateway starts
it, without a gateway or Redis: the whole document the gateway hands the
plugin (the global configuration and the rules under _rules_), YAML, or
JSON when FILE ends in .json. A Higress WasmPlugin manifest is checked
configuration by configuration: its defaultConfig and each matchRules
entry's config, each named in what is printed.

A configuration the plugin takes prints one line per configuration in it,
and the exit status is 0:

  plugin.yaml: ok: rule "chat" limits limit_by_per_api_key (1 key); Redis redis.static (may be a Redis Cluster, redis.timeout 1000 ms)
  wasmplugin.yaml: matchRules[0] (ingress default/llm-chat): ok: rule "llm-chat" limits ...

followed by a note for each pair of rule items that read the same value
(the plugin logs them when it starts): a value both match is limited by
both, or, for two items of one type, counted once at the tighter limits.

A configuration that prices requests (usd_per_* windows, or pricing)
prints the price of each model it names (per_model entries, limit_by_model
keys, pricing entries, model_fallbacks) and of each -model NAME, in US
dollars per million tokens, and where it comes from: a pricing entry, the
price catalog (its provider and model), pricing's "*", or, for a model no
one lists, its provider's dearest catalog price:

  plugin.yaml: price: gpt-4o: $2.5 input, $10 output, $1.25 cache read, $2.5 cache write per million tokens (the catalog: openai's gpt-4o (...))

One the plugin refuses prints the line the plugin logs, saying where and
what is wrong, then the line of the file the field is on, and the exit
status is 2, as for a file that cannot be read or is not YAML or JSON
(said at its line and column):

  plugin.yaml: configuration refused: rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0
      6 |         token_per_minute: 0
        |         ^
`)
}

// runCheck is `atrl check`.
func runCheck(args []string, s streams) int {
	fs := flag.NewFlagSet("atrl check", flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() { checkHelp(s.stderr) }
	path := fs.String("config", "", "the plugin configuration `FILE` (required)")
	var models modelNames
	fs.Var(&models, "model", "a model `NAME` to show the price of (repeatable)")
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
	configs, err := configfile.Load(*path)
	if err != nil {
		fmt.Fprintln(s.stderr, err) // names the file
		return exitBadArgs
	}
	status = exitOK
	for i := range configs {
		c := &configs[i]
		d, err := config.ParseDocument(c.JSON)
		if err != nil {
			fmt.Fprintln(s.stderr, c.Refused(err))
			status = exitBadArgs
			continue
		}
		where := c.Where()
		if d.Global != nil {
			fmt.Fprintf(s.stdout, "%s: ok: %s\n", where, describeConfig(d.Global))
			writeOverlaps(s.stdout, where+": note: ", d.Global)
			writePrices(s.stdout, where+": price: ", d.Global, models)
		}
		for i, r := range d.Rules {
			fmt.Fprintf(s.stdout, "%s: ok: %s[%d] (%s): %s\n", where, config.RulesKey, i, describeMatch(r), describeConfig(r.Config))
			writeOverlaps(s.stdout, fmt.Sprintf("%s: note: %s[%d]: ", where, config.RulesKey, i), r.Config)
			writePrices(s.stdout, fmt.Sprintf("%s: price: %s[%d]: ", where, config.RulesKey, i), r.Config, models)
		}
	}
	return status
}

// writeOverlaps prints a line per pair of rule items that read the same
// value (config.Config.Overlaps), and one per fallback that has fallbacks of
// its own (config.Config.FallbackNotes), as the plugin logs them when it
// starts.
func writeOverlaps(w io.Writer, prefix string, c *config.Config) {
	for _, o := range c.Overlaps() {
		fmt.Fprintf(w, "%s%s\n", prefix, o.Text)
	}
	for _, note := range append(c.FallbackNotes(), c.PricingNotes()...) {
		fmt.Fprintf(w, "%s%s\n", prefix, note)
	}
}

// writePrices prints, for a configuration that prices requests, the price
// of each model it names and of each model asked for, and where it comes
// from, as the plugin prices a request naming it on a route that does not
// address a model (an OpenAI-shaped path).
func writePrices(w io.Writer, prefix string, c *config.Config, asked []string) {
	if !c.Pricing.Priced() {
		for _, m := range asked {
			fmt.Fprintf(w, "%s%s: not priced: the configuration counts no money (usd_per_*) and has no pricing\n", prefix, m)
		}
		return
	}
	for _, m := range append(c.NamedModels(), asked...) {
		price, source, ok := c.Pricing.PriceOf(m, "")
		if !ok {
			fmt.Fprintf(w, "%s%s: no price\n", prefix, m)
			continue
		}
		fmt.Fprintf(w, "%s%s: %s (%s)\n", prefix, m, price, source)
	}
}

// modelNames is a repeatable -model flag.
type modelNames []string

func (m *modelNames) String() string { return strings.Join(*m, ",") }

func (m *modelNames) Set(v string) error {
	if v == "" {
		return errors.New("a model name must not be empty")
	}
	*m = append(*m, v)
	return nil
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
