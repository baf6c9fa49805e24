package main

// The quota commands on one subject: status, reset, grant and override.
// They name a subject as the admin API does, send Redis the calls the
// plugin's quota endpoints send (package quota plans them, package scripts
// encodes them), and print what Redis holds.

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// passwordEnv overrides the configuration's redis.password: a password
// kept out of the configuration file and off the command line.
const passwordEnv = "ATRL_REDIS_PASSWORD"

// defaultTimeout bounds connecting and each command: Redis answers in
// milliseconds, and an operator should not wait long for one that does
// not.
const defaultTimeout = 5 * time.Second

// connFlags are the flags every quota command takes: the configuration,
// where Redis is, how to print.
type connFlags struct {
	fs       *flag.FlagSet
	config   string
	rule     string
	redis    string
	username string
	password string
	json     bool
	timeout  time.Duration
}

// newFlagSet is the flag set of a quota command, with the flags every one
// takes.
func newFlagSet(name string, s streams, help func(io.Writer)) *connFlags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() { help(s.stderr) }
	f := &connFlags{fs: fs}
	fs.StringVar(&f.config, "config", "", "the plugin configuration `FILE` (required)")
	fs.StringVar(&f.rule, "rule", "", "the configuration of the file to use, by its rule_name or `NAME` (a file of several)")
	fs.StringVar(&f.redis, "redis", "", "Redis `host:port` (default: the configuration's redis service)")
	fs.StringVar(&f.username, "username", "", "Redis user `NAME` (default: the configuration's)")
	fs.StringVar(&f.password, "password", "", "Redis `PASSWORD` (default: $"+passwordEnv+", else the configuration's)")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.DurationVar(&f.timeout, "timeout", defaultTimeout, "how long to wait for Redis, per command")
	return f
}

// given says whether the flag was on the command line.
func (f *connFlags) given(name string) bool {
	found := false
	f.fs.Visit(func(fl *flag.Flag) { found = found || fl.Name == name })
	return found
}

// addSubjectFlags adds the flags that name a subject.
func (f *connFlags) addSubjectFlags() {
	f.fs.Int("rule-item", 0, "the subject's rule item: its `INDEX` in rule_items, from 0")
	f.fs.String("threshold", "", "the subject is a threshold: global_threshold or unmatched_threshold")
	f.fs.String("value", "", "the `VALUE` a request of the subject carries")
	f.fs.String("model", "", "the `MODEL` of the subject's per_model limit")
}

// requestFields are the flags that name a subject or an operation's
// parameters, and the fields of the admin API's request they stand for.
var requestFields = map[string]string{
	"rule-item": "rule_item", "threshold": "threshold", "value": "value", "model": "model",
	"window": "window", "kind": "kind", "tokens": "tokens",
}

// quotaCommand is a quota command under way: its name for messages, its
// streams, the configuration and how to reach Redis.
type quotaCommand struct {
	name  string
	s     streams
	rules *config.Config
	// config names the configuration in a file of several ("" for a
	// file of one, see namedConfig).
	config string
	redis  redisOptions
	// redisFromConfig says the address is the configuration's service,
	// which may be a name only the gateway resolves.
	redisFromConfig bool
	json            bool
}

// parseArgs parses flags and positional arguments in any order (`atrl
// override set token_per_day=5000 -config f.yaml ...`) and returns the
// positional ones. ok is false after a bad flag or -h; status says which.
func parseArgs(fs *flag.FlagSet, args []string) (positional []string, status int, ok bool) {
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitBadArgs, false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, exitOK, true
		}
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" { // after "--", all are positional
			return append(positional, rest...), exitOK, true
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}

// open reads the configuration and works out how to reach Redis: -redis,
// or the configuration's service; -username and -password, or
// $ATRL_REDIS_PASSWORD, or the configuration's. A file of several
// configurations (a WasmPlugin manifest, a document with _rules_) needs
// -rule to say which. It returns exitOK to go on.
func (f *connFlags) open(s streams) (*quotaCommand, int) {
	all, status := f.load(s)
	if all == nil {
		return nil, status
	}
	c, err := pickConfig(f.config, all, f.rule)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", f.fs.Name(), err)
		return nil, exitBadArgs
	}
	return f.command(s, c)
}

// openAll is open for each configuration of the file, or each -rule
// names.
func (f *connFlags) openAll(s streams) ([]*quotaCommand, int) {
	all, status := f.load(s)
	if all == nil {
		return nil, status
	}
	picked, err := pickConfigs(f.config, all, f.rule)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: %v\n", f.fs.Name(), err)
		return nil, exitBadArgs
	}
	qs := make([]*quotaCommand, 0, len(picked))
	for i := range picked {
		q, status := f.command(s, &picked[i])
		if q == nil {
			return nil, status
		}
		qs = append(qs, q)
	}
	return qs, exitOK
}

// load checks the flags every quota command takes and reads the
// configurations of -config.
func (f *connFlags) load(s streams) ([]namedConfig, int) {
	name := f.fs.Name()
	if f.config == "" {
		fmt.Fprintf(s.stderr, "%s: -config is required: the plugin's configuration names the subjects and their limits\n", name)
		return nil, exitBadArgs
	}
	if f.timeout <= 0 {
		fmt.Fprintf(s.stderr, "%s: -timeout must be positive, got %v\n", name, f.timeout)
		return nil, exitBadArgs
	}
	all, err := loadConfigs(f.config)
	if err != nil {
		fmt.Fprintf(s.stderr, "%s: -config: %v\n", name, err)
		return nil, exitBadArgs
	}
	return all, exitOK
}

// command is the command on configuration c: how to reach its Redis.
func (f *connFlags) command(s streams, c *namedConfig) (*quotaCommand, int) {
	name := f.fs.Name()
	rules := c.rules
	r := rules.Redis
	password := r.Password
	if r.PasswordEnv != "" { // as the plugin reads it, unless -password or the environment below says otherwise
		password = os.Getenv(r.PasswordEnv)
	}
	opts := redisOptions{addr: f.redis, username: r.Username, password: password, database: r.Database, timeout: f.timeout}
	if opts.addr == "" {
		if strings.HasSuffix(r.ServiceName, config.StaticServiceSuffix) {
			fmt.Fprintf(s.stderr, "%s: redis.service_name %q names an Envoy static cluster, not a host atrl can reach: give Redis's address with -redis host:port\n", name, r.ServiceName)
			return nil, exitBadArgs
		}
		opts.addr = net.JoinHostPort(r.ServiceName, strconv.Itoa(r.ServicePort))
	}
	if p, ok := os.LookupEnv(passwordEnv); ok {
		opts.password = p
	}
	if f.given("username") {
		opts.username = f.username
	}
	if f.given("password") {
		opts.password = f.password
	}
	return &quotaCommand{name: name, s: s, rules: rules, config: c.name, redis: opts, redisFromConfig: f.redis == "", json: f.json}, exitOK
}

// fail reports err and returns the exit status it calls for: 2 for the
// operator's mistake (a subject that does not exist, an operation the
// configuration refuses), 1 for Redis's trouble.
func (q *quotaCommand) fail(err error) int {
	if quota.IsBadRequest(err) {
		fmt.Fprintf(q.s.stderr, "%s: %s\n", q.name, flagMessage(err.Error()))
		return exitBadArgs
	}
	fmt.Fprintf(q.s.stderr, "%s: %v\n", q.name, err)
	return exitFailed
}

// flagMessage names flags where a message of package quota names the
// admin API's fields ("rule_item: required" is "-rule-item: required"),
// and an override's limit as the command line writes it.
func flagMessage(msg string) string {
	head, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return msg
	}
	words := strings.Fields(head)
	for i, w := range words {
		switch name, isField := flagOfField(w); {
		case isField:
			words[i] = "-" + name
		case strings.HasPrefix(w, "limits.") && len(w) > len("limits."):
			words[i] = w[len("limits."):]
		case w != "and":
			return msg // a sentence, not a list of fields
		}
	}
	return strings.Join(words, " ") + ": " + rest
}

func flagOfField(field string) (string, bool) {
	for name, f := range requestFields {
		if f == field {
			return name, true
		}
	}
	return "", false
}

// plan reads the request the flags given make and plans it, as the admin
// API reads its JSON body and plans it: one set of checks and messages
// for both. limits is the JSON object of an override set, else nil.
func (q *quotaCommand) plan(fs *flag.FlagSet, op quota.Op, limits json.RawMessage) (quota.Request, quota.Plan, error) {
	body := map[string]any{}
	fs.Visit(func(fl *flag.Flag) {
		if field, ok := requestFields[fl.Name]; ok {
			body[field] = fl.Value.(flag.Getter).Get()
		}
	})
	if limits != nil {
		body["limits"] = limits
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return quota.Request{}, quota.Plan{}, err
	}
	req, err := quota.ParseRequest(op, raw, "")
	if err != nil {
		return req, quota.Plan{}, err
	}
	plan, err := req.Plan(q.rules)
	return req, plan, err
}

// subjectCommand reads the flags of a command on one subject (and its
// positional arguments, when positional reads them), the configuration,
// plans op and connects to Redis (the caller closes c). When q is nil the
// command stops with status.
func subjectCommand(f *connFlags, s streams, args []string, op quota.Op, positional func([]string) (json.RawMessage, error)) (q *quotaCommand, req quota.Request, plan quota.Plan, c *redisClient, status int) {
	rest, status, ok := parseArgs(f.fs, args)
	if !ok {
		return nil, req, plan, nil, status
	}
	var limits json.RawMessage
	if positional != nil {
		var err error
		if limits, err = positional(rest); err != nil {
			fmt.Fprintf(s.stderr, "%s: %v\n", f.fs.Name(), err)
			return nil, req, plan, nil, exitBadArgs
		}
	} else if len(rest) > 0 {
		return nil, req, plan, nil, unexpectedArg(f.fs, s, rest[0])
	}
	if q, status = f.open(s); q == nil {
		return nil, req, plan, nil, status
	}
	req, plan, err := q.plan(f.fs, op, limits)
	if err != nil {
		return nil, req, plan, nil, q.fail(err)
	}
	if c, status = q.connect(); c == nil {
		return nil, req, plan, nil, status
	}
	return q, req, plan, c, exitOK
}

// unexpectedArg reports an argument a command does not take.
func unexpectedArg(fs *flag.FlagSet, s streams, arg string) int {
	name := fs.Name()
	fmt.Fprintf(s.stderr, "%s: unexpected argument %q; run 'atrl help %s'\n", name, arg, strings.Fields(name)[1])
	return exitBadArgs
}

// connect connects to Redis, or reports why it could not.
func (q *quotaCommand) connect() (*redisClient, int) {
	c, err := dialRedis(q.redis)
	if err != nil {
		msg := err.Error()
		var dnsErr *net.DNSError
		if q.redisFromConfig && errors.As(err, &dnsErr) {
			msg += " (the configuration's redis service: give Redis's address with -redis host:port)"
		}
		fmt.Fprintf(q.s.stderr, "%s: %s\n", q.name, msg)
		return nil, exitFailed
	}
	return c, exitOK
}

// runStatus is `atrl status`.
func runStatus(args []string, s streams) int {
	f := newFlagSet("atrl status", s, statusHelp)
	f.addSubjectFlags()
	q, _, plan, c, status := subjectCommand(f, s, args, quota.OpStatus, nil)
	if q == nil {
		return status
	}
	defer c.Close()
	return q.printStatus(c, plan, "")
}

// printStatus reads the status of the plan's subjects and prints it, after
// a line saying what was done (text only).
func (q *quotaCommand) printStatus(c *redisClient, plan quota.Plan, done string) int {
	st, err := readStatus(c, quota.Options(q.rules), plan.Status)
	if err != nil {
		return q.fail(err)
	}
	doc := quota.Describe(q.rules, plan.Matches, st, false)
	if q.json {
		return q.writeJSON(doc)
	}
	if done != "" {
		fmt.Fprintln(q.s.stdout, done)
	}
	writeStatusTable(q.s.stdout, doc)
	return exitOK
}

// readStatus reads the limits of subjects, all in one slot.
func readStatus(c *redisClient, o scripts.Options, subjects []budget.Subject) ([][]budget.LimitStatus, error) {
	v, err := c.run(o.StatusCall(subjects), subjects[0].Key)
	if err != nil {
		return nil, err
	}
	return scripts.ParseStatus(v, subjects)
}

// writeJSON prints v as one line of JSON.
func (q *quotaCommand) writeJSON(v any) int {
	enc := json.NewEncoder(q.s.stdout)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		fmt.Fprintf(q.s.stderr, "%s: %v\n", q.name, err)
		return exitFailed
	}
	return exitOK
}

// writeStatusTable prints a status document as a table, a limit a line,
// money limits in US dollars; overrides are marked, with a note saying so.
func writeStatusTable(w io.Writer, doc quota.Document) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SUBJECT\tKIND\tWINDOW\tLIMIT\tUSED\tREMAINING\tRESET")
	overridden := false
	for _, s := range doc.Subjects {
		for _, l := range s.Limits {
			limit := string(quota.Amount(l.Kind, l.Limit))
			if l.Overridden {
				limit += "*"
				overridden = true
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", subjectLabel(s), l.Kind, orDash(l.Window), limit,
				quota.Amount(l.Kind, l.Used), quota.Amount(l.Kind, l.Remaining), resetText(l))
		}
	}
	tw.Flush()
	if overridden {
		fmt.Fprintln(w, "\n* an override of the configured limit (atrl override list)")
	}
}

// subjectLabel names a subject in a table: "item 0 sk-1", "item 0 sk-1
// model gpt-4o", "global_threshold", or for a subject other items'
// keys are merged into, "items 0,2 sk-1".
func subjectLabel(s quota.Subject) string {
	label := s.Threshold
	if s.RuleItem != nil {
		items := strconv.Itoa(*s.RuleItem)
		for _, o := range s.Merged {
			if o.RuleItem != nil {
				items += "," + strconv.Itoa(*o.RuleItem)
			}
		}
		label = "item "
		if items != strconv.Itoa(*s.RuleItem) {
			label = "items "
		}
		label += items + " " + printable(s.Value)
	}
	if s.Model != "" && (s.RuleItem == nil || s.Model != s.Value) {
		label += " model " + printable(s.Model)
	}
	return label
}

// printable quotes a value that would not read as one word in a table.
func printable(s string) string {
	if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '"' || !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resetText is when a window starts anew, "42s", "59m59s", "23h59m",
// "24d16h42m"; "-" for a concurrency limit.
func resetText(l quota.Limit) string {
	if l.Kind == quota.KindConcurrent {
		return "-"
	}
	return seconds(l.ResetSeconds)
}

// seconds is a duration as atrl shows one: to the second under an hour,
// to the minute beyond, with days past a day (a month's reset reads
// 24d16h42m, not 592h42m).
func seconds(n int64) string {
	switch {
	case n < 60:
		return strconv.FormatInt(n, 10) + "s"
	case n < 3600:
		return fmt.Sprintf("%dm%ds", n/60, n%60)
	case n < 86400:
		return fmt.Sprintf("%dh%dm", n/3600, n%3600/60)
	}
	return fmt.Sprintf("%dd%dh%dm", n/86400, n%86400/3600, n%3600/60)
}

// runReset is `atrl reset`.
func runReset(args []string, s streams) int {
	f := newFlagSet("atrl reset", s, resetHelp)
	f.addSubjectFlags()
	f.fs.String("window", "", "reset the windows of this length only: second, minute, hour, day, week or month")
	f.fs.String("kind", "", "reset the windows of this kind only: tokens, requests or usd")
	q, _, plan, c, status := subjectCommand(f, s, args, quota.OpReset, nil)
	if q == nil {
		return status
	}
	defer c.Close()
	v, err := c.run(quota.Options(q.rules).ResetCall([]budget.Subject{plan.Target}), plan.Target.Key)
	if err != nil {
		return q.fail(err)
	}
	n, err := scripts.ParseReset(v)
	if err != nil {
		return q.fail(err)
	}
	return q.printStatus(c, plan, fmt.Sprintf("reset %s: %d %s deleted\n", windowsText(plan.Target.Windows), n, plural(n, "counter")))
}

// runGrant is `atrl grant`.
func runGrant(args []string, s streams) int {
	f := newFlagSet("atrl grant", s, grantHelp)
	f.addSubjectFlags()
	f.fs.Int64("tokens", 0, "the `N` tokens to give back (required)")
	f.fs.String("window", "", "give back in the token window of this length only: second, minute, hour, day, week or month")
	q, req, plan, c, status := subjectCommand(f, s, args, quota.OpGrant, nil)
	if q == nil {
		return status
	}
	defer c.Close()
	subjects := []budget.Subject{plan.Target}
	v, err := c.run(quota.Options(q.rules).GrantCall(subjects, req.Tokens), plan.Target.Key)
	if err == nil {
		err = scripts.ParseGrant(v, subjects)
	}
	if err != nil {
		return q.fail(err)
	}
	return q.printStatus(c, plan, fmt.Sprintf("granted up to %d tokens back in %s\n", req.Tokens, windowsText(plan.Target.Windows)))
}

// windowsText names windows for a line of text: "the minute token window",
// "the minute, day token windows".
func windowsText(ws []config.Window) string {
	var names []string
	for _, w := range ws {
		unit := "token"
		switch w.Unit {
		case config.UnitRequests:
			unit = "request"
		case config.UnitUSD:
			unit = "money"
		}
		names = append(names, config.WindowName(w.Seconds)+" "+unit)
	}
	return "the " + strings.Join(names, ", ") + " " + plural(int64(len(ws)), "window")
}

func plural(n int64, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// subjectFlagsHelp describes the flags naming a subject.
const subjectFlagsHelp = `
  -rule-item INDEX -value VALUE
	a subject of a rule item: its index in rule_items (from 0), and the
	value a request of the subject carries: the header, parameter, cookie
	or consumer value, the client IP (for an IPv6 client, its network as
	the status shows it, 2001:db8::/64), or the model for limit_by_model
	and limit_by_per_model. For the types whose requests share a counter
	per limit key (limit_by_header…), any value the key matches.
  -threshold global_threshold|unmatched_threshold
	the subject of a threshold (no -value)
  -model MODEL
	with a subject whose limit key has per_model: its limits for that
	model too (status), or those alone (the other commands)
`

// connFlagsHelp describes the flags every quota command takes.
const connFlagsHelp = `
  -config FILE
	the plugin's configuration (required): YAML, or JSON when FILE ends
	in .json, or a Higress WasmPlugin manifest. Its rules name the
	subjects and their limits, its redis section says where Redis is.
  -rule NAME
	the configuration to use when the file holds several (a manifest's
	defaultConfig and matchRules configs, a document's _rules_): its
	rule_name, or its name as atrl check prints it (defaultConfig,
	matchRules[0], _rules_[1]). atrl top, without it, lists the subjects
	of every configuration, each under its name.
  -redis HOST:PORT
	Redis's address (default: redis.service_name:service_port, which
	must then be a host atrl can reach, not an Envoy static cluster
	(*.static)). On a Redis Cluster, any node: redirections are followed.
  -username NAME, -password PASSWORD
	how to log in to Redis (default: the configuration's redis.username
	and redis.password; $` + passwordEnv + `, when set, replaces the
	configuration's password). redis.database is selected.
  -json
	print JSON
  -timeout DURATION
	how long to wait for Redis to connect and for each answer
	(default 5s)

Exit status: 0 done; 1 Redis could not be reached, refused or failed;
2 a bad flag, configuration or subject (nothing was sent to Redis).
`

func statusHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl status -config FILE (-rule-item N -value V | -threshold NAME) [-model M] [flags]

Prints a subject's limits and what it has used, as the plugin counts them
in Redis now: for each window its limit, what it used (a sliding window
with the previous bucket's share), what remains and when the window starts
anew (42s, 5h2m, 24d16h42m), and requests in progress for
max_concurrent_requests. A money window (usd_per_*, kind usd) counts US
dollars. A limit that an override replaces is marked "*" (see 'atrl help
override'). Nothing is written.

  atrl status -config plugin.yaml -rule-item 0 -value sk-1
  SUBJECT      KIND      WINDOW  LIMIT   USED     REMAINING  RESET
  item 0 sk-1  tokens    minute  1000    300      700        42s
  item 0 sk-1  tokens    month   500000  41200    458800     24d16h42m
  item 0 sk-1  requests  hour    50      12       38         17m3s
  item 0 sk-1  usd       day     20      0.00987  19.99013   5h2m

-json prints the document the plugin's quota endpoints answer:

  {"subjects":[{"rule_item":0,"key":"*","value":"sk-1","limits":[{"kind":"tokens",
    "window":"minute","limit":1000,"used":300,"remaining":700,"reset_seconds":42}]}]}

with "threshold" in place of "rule_item" for the thresholds, "model" and
"model_key" for a per_model limit, "overridden": true for an override, and
a money window's "limit", "used" and "remaining" in US dollars
({"kind":"usd","window":"day","limit":20,"used":0.00987,...}).

Flags:
`+subjectFlagsHelp+connFlagsHelp)
}

func resetHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl reset -config FILE SUBJECT [-window W] [-kind tokens|requests|usd] [flags]

Clears a subject's windows: what it used in them now counts as nothing
(with a sliding window, the previous bucket it still reads is cleared too).
Requests in progress are left: they end by themselves. Then prints the
subject's status, as atrl status does. SUBJECT is as for atrl status; with
-model, the subject's limits for that model alone are reset.

  -window second|minute|hour|day
	only the windows of that length
  -kind tokens|requests|usd
	only the token windows (token_per_*), the request windows
	(query_per_*) or the money windows (usd_per_*)

  atrl reset -config plugin.yaml -rule-item 0 -value sk-1 -window minute

Flags:
`+subjectFlagsHelp+connFlagsHelp)
}

func grantHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl grant -config FILE SUBJECT -tokens N [-window W] [flags]

Gives tokens back to a subject in each of its token windows: N off what it
used in the current bucket (a sliding window, what that does not hold off
the previous one), down to zero: never more than it used. Request and
money windows are left alone (for money: 'atrl reset -kind usd', or raise
usd_per_* with 'atrl override set'). Then prints the subject's status, as
atrl status does. SUBJECT is as for atrl status; with -model, the
subject's limits for that model alone.

  -tokens N
	the tokens to give back (required)
  -window second|minute|hour|day
	only the token window of that length

  atrl grant -config plugin.yaml -rule-item 0 -value sk-1 -tokens 5000 -window day

Flags:
`+subjectFlagsHelp+connFlagsHelp)
}
