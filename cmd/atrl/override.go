package main

// atrl override: a subject's limit overrides (limit_overrides), which
// replace its configured limits in Redis until they are removed.

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// runOverride is `atrl override set|rm|list`.
func runOverride(args []string, s streams) int {
	if len(args) == 0 {
		fmt.Fprintln(s.stderr, "atrl override: set, rm or list? run 'atrl help override'")
		return exitBadArgs
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "set":
		return runOverrideSet(rest, s)
	case "rm":
		return runOverrideRemove(rest, s)
	case "list":
		return runOverrideList(rest, s)
	case "-h", "-help", "--help":
		overrideHelp(s.stderr)
		return exitOK
	default:
		fmt.Fprintf(s.stderr, "atrl override: unknown operation %q: set, rm or list; run 'atrl help override'\n", sub)
		return exitBadArgs
	}
}

// runOverrideSet is `atrl override set ... FIELD=LIMIT...`.
func runOverrideSet(args []string, s streams) int {
	f := newFlagSet("atrl override set", s, overrideHelp)
	f.addSubjectFlags()
	q, _, plan, c, status := subjectCommand(f, s, args, quota.OpSetOverrides, fieldLimits)
	if q == nil {
		return status
	}
	defer c.Close()
	return q.changeOverrides(c, plan.Target.Key, plan.Overrides)
}

// runOverrideRemove is `atrl override rm`: a set of no overrides.
func runOverrideRemove(args []string, s streams) int {
	f := newFlagSet("atrl override rm", s, overrideHelp)
	f.addSubjectFlags()
	q, _, plan, c, status := subjectCommand(f, s, args, quota.OpRemoveOverrides, nil)
	if q == nil {
		return status
	}
	defer c.Close()
	return q.changeOverrides(c, plan.Target.Key, nil)
}

// changeOverrides replaces the overrides of the subject key with limits
// (none: removes them) and prints them as they are after.
func (q *quotaCommand) changeOverrides(c *redisClient, key []byte, limits []scripts.Override) int {
	v, err := c.run(scripts.OverrideCall(key, limits), key)
	if err != nil {
		return q.fail(err)
	}
	after, err := scripts.ParseOverrides(v)
	if err != nil {
		return q.fail(err)
	}
	return q.printOverrides(after)
}

// runOverrideList is `atrl override list`: the hash the scripts keep a
// subject's overrides in, read as it is.
func runOverrideList(args []string, s streams) int {
	f := newFlagSet("atrl override list", s, overrideHelp)
	f.addSubjectFlags()
	q, _, plan, c, status := subjectCommand(f, s, args, quota.OpStatus, nil) // a read, planned as the status is
	if q == nil {
		return status
	}
	defer c.Close()
	key := plan.Target.Key
	v, err := c.do(key, redisCommand("HGETALL", string(key)+":o"))
	if err != nil {
		return q.fail(err)
	}
	overrides, err := scripts.ParseOverrides(v) // HGETALL's reply has the shape of the override script's
	if err != nil {
		return q.fail(err)
	}
	return q.printOverrides(overrides)
}

// printOverrides prints overrides as the command line writes them, a
// FIELD=LIMIT a line, or as a JSON object from field to limit, in the
// order Redis keeps them. It warns when the configuration does not apply
// them.
func (q *quotaCommand) printOverrides(overrides []scripts.Override) int {
	if !q.rules.LimitOverrides && len(overrides) > 0 {
		fmt.Fprintf(q.s.stderr, "%s: note: limit_overrides is off in this configuration: the plugin does not apply these\n", q.name)
	}
	fields := quota.Fields(overrides)
	if q.json {
		return q.writeJSON(orderedLimits(fields))
	}
	if len(fields) == 0 {
		fmt.Fprintln(q.s.stdout, "no overrides")
	}
	for _, l := range fields {
		fmt.Fprintf(q.s.stdout, "%s=%s\n", l.Field, l.Value())
	}
	return exitOK
}

// orderedLimits is a JSON object from field to limit (a money window's in
// US dollars) that keeps the fields' order (a map would sort them).
func orderedLimits(fields []quota.FieldLimit) json.RawMessage {
	values := make([]json.Number, len(fields))
	for i, l := range fields {
		values[i] = l.Value()
	}
	return jsonObject(fields, values)
}

// jsonObject writes the object from each field's name to its value, in
// order.
func jsonObject(fields []quota.FieldLimit, values []json.Number) json.RawMessage {
	b := []byte{'{'}
	for i, l := range fields {
		if i > 0 {
			b = append(b, ',')
		}
		name, _ := json.Marshal(l.Field)
		b = append(append(append(b, name...), ':'), values[i]...)
	}
	return append(b, '}')
}

// fieldLimits reads the FIELD=LIMIT arguments of an override set into the
// limits object of the admin API's request (whose reading checks the
// fields and the range of the limits): integers, and for money windows
// (usd_per_*) numbers of US dollars, passed on as written.
func fieldLimits(args []string) (json.RawMessage, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("no limits: give FIELD=LIMIT arguments, e.g. token_per_day=5000 max_concurrent_requests=3")
	}
	fields := make([]quota.FieldLimit, 0, len(args))
	values := make([]json.Number, 0, len(args))
	for _, a := range args {
		field, limit, ok := strings.Cut(a, "=")
		if !ok || field == "" {
			return nil, fmt.Errorf("%q: a limit is FIELD=LIMIT, e.g. token_per_day=5000", a)
		}
		if strings.HasPrefix(field, "usd_per_") {
			if !isJSONNumber(limit) {
				return nil, fmt.Errorf("%q: the limit must be a number of US dollars, got %q", a, limit)
			}
		} else if _, err := strconv.ParseInt(limit, 10, 64); err != nil {
			return nil, fmt.Errorf("%q: the limit must be an integer, got %q", a, limit)
		}
		fields = append(fields, quota.FieldLimit{Field: field})
		values = append(values, json.Number(limit))
	}
	return jsonObject(fields, values), nil
}

// isJSONNumber says whether s is a JSON number, as JSON writes it (12,
// 0.5, 1e3; not .5, +1, Inf or NaN).
func isJSONNumber(s string) bool {
	return strings.TrimSpace(s) == s && gjson.Valid(s) && gjson.Parse(s).Type == gjson.Number
}

func overrideHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl override set  -config FILE SUBJECT FIELD=LIMIT... [flags]
       atrl override rm   -config FILE SUBJECT [flags]
       atrl override list -config FILE SUBJECT [flags]

SUBJECT is -rule-item N -value V, or -threshold global_threshold|
unmatched_threshold, and -model M for a per_model limit (see 'atrl help
status').

set replaces all the subject's limit overrides with the limits given: each
FIELD is a limit the subject's key configures (token_per_second …
token_per_day, query_per_second … query_per_day, usd_per_hour, usd_per_day,
max_concurrent_requests), and LIMIT its new value: an integer, or for
usd_per_* a number of US dollars (usd_per_day=50, usd_per_hour=0.25),
rounded to the nanodollar. An override replaces the configured limit in
every admission from then on, on every gateway, and lasts until removed: it
is kept in Redis (the hash <subject key>:o), not in the configuration. The
configuration must have limit_overrides: true, else the plugin does not read
overrides and set refuses (exit status 2).

rm removes all the subject's overrides: the configured limits apply again.

list prints the subject's overrides. set, rm and list print the overrides
after, a FIELD=LIMIT a line ("no overrides" when there are none), or with
-json an object: {"token_per_day":5000,"usd_per_day":50,"max_concurrent_requests":3}.

  atrl override set -config plugin.yaml -rule-item 0 -value sk-1 token_per_day=50000
  atrl override list -config plugin.yaml -rule-item 0 -value sk-1
  atrl override rm -config plugin.yaml -rule-item 0 -value sk-1

Flags:
`+subjectFlagsHelp+connFlagsHelp)
}
