package main

// atrl top: the subjects closest to their limits. Redis holds no list of
// subjects, so they are found by their window counters: a SCAN of the
// rule's keys on every master, keeping the buckets of the current windows.
// Each subject's key is read back into its rule item, value and model and
// resolved against the configuration; its limits (overrides included) are
// then read as `atrl status` reads them.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

const (
	defaultTopN      = 10
	defaultScanLimit = 100000
	// scanCount is SCAN's COUNT: about how many keys a node looks at per
	// call. Larger calls are fewer round trips; each still takes a node
	// only a few milliseconds.
	scanCount = 1000
	// maxScanCalls bounds the SCAN calls on one node, whatever it answers:
	// a billion keys.
	maxScanCalls = 1 << 20
)

// runTop is `atrl top`.
func runTop(args []string, s streams) int {
	f := newFlagSet("atrl top", s, topHelp)
	n := f.fs.Int("n", defaultTopN, "print the `N` subjects closest to their limits")
	scanLimit := f.fs.Int("scan-limit", defaultScanLimit, "look at no more than `N` keys")
	rest, status, ok := parseArgs(f.fs, args)
	switch {
	case !ok:
		return status
	case len(rest) > 0:
		return unexpectedArg(f.fs, s, rest[0])
	case *n < 1 || *scanLimit < 1:
		fmt.Fprintln(s.stderr, "atrl top: -n and -scan-limit must be at least 1")
		return exitBadArgs
	}
	qs, status := f.openAll(s)
	if qs == nil {
		return status
	}
	all := []topRow{} // -json: every configuration's rows
	for i, q := range qs {
		if len(qs) > 1 && !q.json {
			if i > 0 {
				fmt.Fprintln(s.stdout)
			}
			fmt.Fprintf(s.stdout, "%s:\n", configLabel(q.config, q.rules))
		}
		rows, status := q.top(*n, *scanLimit)
		if rows == nil {
			return status
		}
		all = append(all, rows...)
	}
	if qs[0].json {
		return qs[0].writeJSON(all)
	}
	return exitOK
}

// top lists the subjects of the command's configuration closest to their
// limits, at most n of those with limits and n of the others, looking at
// no more than scanLimit keys: it prints them, or, with -json, returns
// them (never nil when it succeeded; nil, and the exit status, when not).
func (q *quotaCommand) top(n, scanLimit int) ([]topRow, int) {
	c, status := q.connect()
	if c == nil {
		return nil, status
	}
	defer c.Close()
	scan, err := scanSubjects(c, q.rules, scanLimit)
	if err != nil {
		return nil, q.fail(err)
	}
	rows, unknown, err := q.rank(c, scan.subjects)
	if err != nil {
		return nil, q.fail(err)
	}
	rows, unknown = rows[:min(len(rows), n)], unknown[:min(len(unknown), n)]
	if q.json {
		if scan.truncated {
			fmt.Fprintf(q.s.stderr, "atrl top: stopped at -scan-limit %d keys: subjects in the keys not looked at are missing\n", scanLimit)
		}
		all := append(append([]topRow{}, rows...), unknown...) // [] when there are none
		for i := range all {
			all[i].Config = q.config
		}
		return all, exitOK
	}
	writeTop(q.s.stdout, rows, unknown)
	fmt.Fprintf(q.s.stdout, "\nlooked at %d %s on %d %s", scan.keys, plural(int64(scan.keys), "key"), scan.nodes, plural(int64(scan.nodes), "node"))
	if scan.truncated {
		fmt.Fprintf(q.s.stdout, ", and stopped at -scan-limit %d: subjects in the keys not looked at are missing", scanLimit)
	}
	fmt.Fprintln(q.s.stdout)
	return []topRow{}, exitOK
}

// bucketKey is the key of a window's bucket, read back into its parts (see
// package cachekey):
//
//	atrl:{<rule>|<limit type>|<source>|<value>}[:m:<model>]:t60:29533012
type bucketKey struct {
	subject string // the subject's key, with :m:<model> for a per_model subject
	parts   [4]string
	model   string // "" for none
	window  config.Window
	bucket  int64
}

// parseBucketKey reads a bucket's key; ok is false for the subjects' other
// keys (leases, overrides, markers) and for what is not the plugin's.
func parseBucketKey(key string) (k bucketKey, ok bool) {
	parts, tail, ok := cachekey.Parts(key)
	if !ok {
		return k, false
	}
	k.parts = parts
	if m, ok := strings.CutPrefix(tail, cachekey.ModelSeparator); ok {
		i := strings.IndexByte(m, ':') // a plain model has none
		if i <= 0 {
			return k, false
		}
		k.model, tail = m[:i], m[i:]
	}
	k.subject = key[:len(key)-len(tail)]
	f := strings.Split(tail, ":") // "", "t60", "29533012"
	if len(f) != 3 || f[0] != "" || len(f[1]) < 2 {
		return k, false
	}
	unit, seconds, ok := scripts.ParseWindowName(f[1])
	bucket, err := strconv.ParseInt(f[2], 10, 64)
	if !ok || err != nil || bucket < 0 {
		return k, false
	}
	k.window = config.Window{Unit: unit, Seconds: seconds, Limit: 1}
	k.bucket = bucket
	return k, true
}

// foundSubject is a subject whose counters of the current windows a scan
// found.
type foundSubject struct {
	key     bucketKey       // one of its bucket keys
	windows []config.Window // its windows counting now
}

// scanned is what a scan found.
type scanned struct {
	subjects  []*foundSubject // in key order
	keys      int             // keys looked at
	nodes     int
	truncated bool // -scan-limit stopped it
	// outboxes are the keys of the budget alerts' outboxes found (see
	// scripts.Outbox): Redis deletes one that holds no alert.
	outboxes []string
}

// scanSubjects finds the subjects of the configuration's rule that count
// in the current windows (by Redis's clock), looking at no more than limit
// keys across the masters.
func scanSubjects(c *redisClient, rules *config.Config, limit int) (scanned, error) {
	var out scanned
	now, err := c.time()
	if err != nil {
		return out, err
	}
	masters, err := c.masters()
	if err != nil {
		return out, err
	}
	sliding := rules.WindowType == config.Sliding
	bySubject := map[string]*foundSubject{}
	for _, addr := range masters {
		out.nodes++
		seen, complete, err := c.scan(addr, rulePattern(rules.RuleName), limit-out.keys, func(key string) {
			if _, ok := scripts.OutboxOwner(key); ok {
				c.owner[cachekey.Slot([]byte(key))] = addr
				out.outboxes = append(out.outboxes, key)
				return
			}
			k, ok := parseBucketKey(key)
			if !ok {
				return
			}
			if rules.Calendar.Aligned(k.window.Seconds) { // a calendar period's bucket is numbered by its start
				if start, _ := rules.Calendar.Period(k.window.Seconds, now); k.bucket != start {
					return
				}
			} else if current := now / k.window.Seconds; k.bucket != current && (!sliding || k.bucket != current-1) { // sliding: the previous bucket still counts
				return
			}
			c.owner[cachekey.Slot([]byte(k.subject))] = addr // its status calls go straight there
			f := bySubject[k.subject]
			if f == nil {
				f = &foundSubject{key: k}
				bySubject[k.subject] = f
				out.subjects = append(out.subjects, f)
			}
			if !hasWindow(f.windows, k.window) {
				f.windows = append(f.windows, k.window)
			}
		})
		out.keys += seen
		if err != nil {
			return out, err
		}
		if !complete {
			out.truncated = true
			break
		}
	}
	sort.Slice(out.subjects, func(i, j int) bool { return out.subjects[i].key.subject < out.subjects[j].key.subject })
	return out, nil
}

func hasWindow(ws []config.Window, w config.Window) bool {
	for _, x := range ws {
		if x.Unit == w.Unit && x.Seconds == w.Seconds {
			return true
		}
	}
	return false
}

// rulePattern is the SCAN pattern of a rule's keys, its name as keys
// write it, glob characters escaped.
func rulePattern(rule string) string {
	head := string(cachekey.AppendSubject(nil, rule, "", "", ""))
	head = head[:strings.IndexByte(head, '|')+1] // atrl:{<rule>|
	var b strings.Builder
	for _, r := range head {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String() + "*"
}

// time reads Redis's clock, in whole seconds: what the scripts count
// windows by.
func (c *redisClient) time() (int64, error) {
	v, err := c.do(nil, redisCommand("TIME"))
	if err != nil {
		return 0, err
	}
	a := v.Array()
	var sec int64
	if len(a) == 2 {
		sec, err = strconv.ParseInt(a[0].String(), 10, 64)
	}
	if len(a) != 2 || err != nil || sec <= 0 {
		return 0, fmt.Errorf("redis %s: TIME answered %q", c.opts.addr, v.String())
	}
	return sec, nil
}

// scan calls visit with the keys matching pattern on the node at addr,
// at most limit of them; complete says it saw them all. It returns how
// many it passed to visit.
func (c *redisClient) scan(addr, pattern string, limit int, visit func(key string)) (seen int, complete bool, err error) {
	n, err := c.conn(addr)
	if err != nil {
		return 0, false, err
	}
	cursor := "0"
	for calls := 0; calls < maxScanCalls; calls++ {
		v, err := n.do(redisCommand("SCAN", cursor, "MATCH", pattern, "COUNT", strconv.Itoa(scanCount)))
		if err != nil {
			return seen, false, err
		}
		a := v.Array()
		if len(a) != 2 {
			return seen, false, fmt.Errorf("redis %s: SCAN answered %q", addr, v.String())
		}
		for _, key := range a[1].Array() {
			if seen == limit {
				return seen, false, nil
			}
			visit(key.String())
			seen++
		}
		if cursor = a[0].String(); cursor == "0" {
			return seen, true, nil
		}
		if seen == limit {
			return seen, false, nil
		}
	}
	return seen, false, fmt.Errorf("redis %s: SCAN did not finish after %d calls", addr, maxScanCalls)
}

// topRow is a subject in atrl top's list: the one of its limits it is
// closest to, or for a subject whose limits are unknown (Limit nil), its
// most used window and why (Note). Limit, Used and Remaining are written
// as the status document writes them (quota.Amount: a money window's in US
// dollars).
type topRow struct {
	// Config names the row's configuration in a file of several (a
	// WasmPlugin manifest's "defaultConfig"...; see namedConfig).
	Config     string       `json:"config,omitempty"`
	RuleItem   *int         `json:"rule_item,omitempty"`
	Threshold  string       `json:"threshold,omitempty"`
	Value      string       `json:"value"`
	Model      string       `json:"model,omitempty"`
	Kind       string       `json:"kind"`
	Window     string       `json:"window,omitempty"`
	Limit      *json.Number `json:"limit"`
	Used       json.Number  `json:"used"`
	Remaining  *json.Number `json:"remaining"`
	Fraction   *float64     `json:"fraction"`
	Overridden bool         `json:"overridden,omitempty"`
	RedisKey   string       `json:"redis_key"`
	Note       string       `json:"note,omitempty"`

	used int64 // Used, in its window's unit (nanodollars for money)
}

// setAmounts sets the row's limit (nil: unknown), used and remaining, of
// its Kind.
func (r *topRow) setAmounts(limit *int64, used, remaining int64) {
	r.used, r.Used = used, quota.Amount(r.Kind, used)
	if limit != nil {
		l, rem := quota.Amount(r.Kind, *limit), quota.Amount(r.Kind, remaining)
		r.Limit, r.Remaining = &l, &rem
	}
}

// rank reads the limits of the subjects found and returns those resolved,
// closest to a limit first, and those whose limits are unknown, most used
// first.
func (q *quotaCommand) rank(c *redisClient, subjects []*foundSubject) (rows, unknown []topRow, err error) {
	for _, f := range subjects {
		matches, note := resolveFound(q.rules, f.key)
		if matches == nil {
			row, err := q.unknownRow(c, f, note)
			if err != nil {
				return nil, nil, err
			}
			unknown = append(unknown, row)
			continue
		}
		row, err := q.limitRow(c, matches, f.key.subject)
		if err != nil {
			return nil, nil, err
		}
		rows = append(rows, row)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if *rows[i].Fraction != *rows[j].Fraction {
			return *rows[i].Fraction > *rows[j].Fraction
		}
		return rows[i].used > rows[j].used
	})
	sort.SliceStable(unknown, func(i, j int) bool {
		return moreUsed(unknown[i].Kind, unknown[i].used, unknown[j].Kind, unknown[j].used)
	})
	return rows, unknown, nil
}

// moreUsed says whether a window of kind a that used x comes before one of
// kind b that used y among windows whose limits are unknown: counts of
// tokens and requests by what they used, then money windows, whose
// nanodollars are no count of the same scale.
func moreUsed(a string, x int64, b string, y int64) bool {
	if (a == quota.KindUSD) != (b == quota.KindUSD) {
		return b == quota.KindUSD
	}
	return x > y
}

// limitRow reads the status of a resolved subject (the last of matches,
// its parent before it for a per_model one) and returns its row: the limit
// it has used the largest part of.
func (q *quotaCommand) limitRow(c *redisClient, matches []config.Match, key string) (topRow, error) {
	m := matches[len(matches)-1:]
	target := budget.SubjectOf(q.rules, m[0])
	target.Suffix = 0 // read alone: a key of its own
	subjects := []budget.Subject{target}
	st, err := readStatus(c, quota.Options(q.rules), subjects)
	if err != nil {
		return topRow{}, err
	}
	s := quota.Describe(q.rules, m, st, false).Subjects[0]
	row := topRow{RuleItem: s.RuleItem, Threshold: s.Threshold, Value: s.Value, Model: s.Model, RedisKey: key}
	var best quota.Limit
	fraction := -1.0
	for _, l := range s.Limits { // a limit key has at least one limit
		if f := float64(l.Used) / float64(l.Limit); f > fraction {
			best, fraction = l, f
		}
	}
	row.Kind, row.Window, row.Overridden, row.Fraction = best.Kind, best.Window, best.Overridden, &fraction
	row.setAmounts(&best.Limit, best.Used, best.Remaining)
	return row, nil
}

// unknownRow reads what a subject whose limits are unknown has used in the
// windows found, with status.lua (so a sliding window counts as the
// plugin counts it) and a limit of 1 it never shows, and returns its row:
// its most used window.
func (q *quotaCommand) unknownRow(c *redisClient, f *foundSubject, note string) (topRow, error) {
	subjects := []budget.Subject{{Key: []byte(f.key.subject), Windows: f.windows}}
	st, err := readStatus(c, scripts.Options{Sliding: q.rules.WindowType == config.Sliding}, subjects)
	if err != nil {
		return topRow{}, err
	}
	row := topRow{Value: f.key.parts[3], Model: f.key.model, RedisKey: f.key.subject, Note: note}
	row.RuleItem, row.Threshold = itemOf(q.rules, f.key)
	var best *budget.LimitStatus
	for i, l := range st[0] {
		if best == nil || moreUsed(quota.KindName(l.Kind), l.Used, quota.KindName(best.Kind), best.Used) {
			best = &st[0][i]
		}
	}
	row.Kind, row.Window = quota.KindName(best.Kind), config.WindowName(best.Seconds)
	row.setAmounts(nil, best.Used, 0)
	return row, nil
}

// resolveFound finds the configuration's limits of a subject found in
// Redis: the matches of a request that counts in it, the subject's own
// last. When there are none, note says why.
func resolveFound(rules *config.Config, k bucketKey) (matches []config.Match, note string) {
	if isHashed(k.parts[3]) || isHashed(k.model) {
		return nil, "the value or model is hashed in Redis (not plain, or longer than 64 bytes): its limits are unknown"
	}
	for _, ref := range refsOf(rules, k) {
		var ms []config.Match
		var err error
		if ref.Threshold == "" && !rules.Items[ref.Item].Type.PerValue() {
			ms, err = resolveKey(rules, ref.Item, k.parts[3], k.model)
		} else {
			ms, err = rules.Resolve(ref)
		}
		if err == nil && string(budget.SubjectOf(rules, ms[len(ms)-1]).Key) == k.subject {
			return ms, ""
		}
	}
	return nil, "no longer limited by the configuration"
}

// refsOf names the subject of a key as the operator would, once for each
// threshold or rule item whose keys it has the head of (rule items of one
// type reading one source share their subjects' keys).
func refsOf(rules *config.Config, k bucketKey) []config.SubjectRef {
	var refs []config.SubjectRef
	for _, th := range []struct {
		name string
		on   bool
	}{{config.GlobalThreshold, rules.Global != nil}, {config.UnmatchedThreshold, rules.Unmatched != nil}} {
		if th.on && hasHead(k, rules.RuleName, th.name, "") && k.parts[3] == "" {
			refs = append(refs, config.SubjectRef{Threshold: th.name, Model: k.model})
		}
	}
	for i := range rules.Items {
		it := &rules.Items[i]
		if hasHead(k, rules.RuleName, it.Type.String(), it.Name) {
			refs = append(refs, config.SubjectRef{Item: i, Value: k.parts[3], Model: k.model})
		}
	}
	return refs
}

// itemOf is the rule item or threshold of a key, when one has its head.
func itemOf(rules *config.Config, k bucketKey) (*int, string) {
	refs := refsOf(rules, k)
	switch {
	case len(refs) == 0:
		return nil, ""
	case refs[0].Threshold != "":
		return nil, refs[0].Threshold
	}
	return &refs[0].Item, ""
}

// hasHead says whether a key is of that rule, limit type and source.
func hasHead(k bucketKey, rule, limitType, source string) bool {
	head := cachekey.AppendSubject(nil, rule, limitType, source, "")
	parts := strings.SplitN(string(head[len(cachekey.Prefix)+1:]), "|", 4)
	return parts[0] == k.parts[0] && parts[1] == k.parts[1] && parts[2] == k.parts[2]
}

func isHashed(part string) bool { return strings.HasPrefix(part, "#") }

// resolveKey resolves the subject of a rule item whose requests share a
// counter per limit key (limit_by_header, limit_by_model…): its value in
// Redis is the key as configured, which Resolve, taking the value a
// request carries, cannot always be given ("regexp:^sk-" matches none of
// the keys' requests' values but its own). The configuration's own
// matcher still picks the per_model entry of model: a copy of the
// configuration whose global threshold is that key resolves it.
func resolveKey(rules *config.Config, item int, key, model string) ([]config.Match, error) {
	it := &rules.Items[item]
	for j := range it.Keys {
		if it.Keys[j].Key != key {
			continue
		}
		c := *rules
		c.Global = &it.Keys[j]
		ms, err := c.Resolve(config.SubjectRef{Threshold: config.GlobalThreshold, Model: model})
		if err != nil {
			return nil, err
		}
		for i := range ms {
			ms[i].Item, ms[i].Value = it, key
		}
		return ms, nil
	}
	return nil, config.ErrNoSuchSubject
}

// writeTop prints the rows as a table, then the subjects whose limits are
// unknown, and why.
func writeTop(w io.Writer, rows, unknown []topRow) {
	if len(rows) == 0 && len(unknown) == 0 {
		fmt.Fprintln(w, "no subject counts in the current windows")
		return
	}
	if len(rows) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tKIND\tWINDOW\tLIMIT\tUSED\tREMAINING\tUSED%")
		for _, r := range rows {
			limit := string(*r.Limit)
			if r.Overridden {
				limit += "*"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%.1f%%\n", rowLabel(r), r.Kind, orDash(r.Window), limit, r.Used, *r.Remaining, 100**r.Fraction)
		}
		tw.Flush()
	}
	if len(unknown) > 0 {
		if len(rows) > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, "Subjects whose limits are unknown:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SUBJECT\tKIND\tWINDOW\tUSED\tWHY")
		for _, r := range unknown {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", rowLabel(r), r.Kind, r.Window, r.Used, r.Note)
		}
		tw.Flush()
	}
}

// rowLabel names a row's subject as subjectLabel does, or by its Redis key
// when its rule item is unknown.
func rowLabel(r topRow) string {
	if r.RuleItem == nil && r.Threshold == "" {
		return r.RedisKey
	}
	return subjectLabel(quota.Subject{Name: quota.Name{RuleItem: r.RuleItem, Threshold: r.Threshold, Value: r.Value, Model: r.Model}})
}

func topHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl top -config FILE [-n 10] [-scan-limit 100000] [flags]

Lists the subjects closest to their limits: those that count in a current
window of the configuration's rule (rule_name), each with the limit it has
used the largest part of (overrides included), most used first.

Redis keeps no list of subjects: they are found by their counters, with
SCAN on every master of a Redis Cluster (CLUSTER NODES), looking at no
more than -scan-limit of the rule's keys in all. When it stops there, it
says so: subjects in the keys not looked at are missing. A subject only in
progress (max_concurrent_requests) but counting in no window is not found.

A subject found in Redis is read back into its rule item, value and model.
Its limits are unknown when its value or model is hashed in the key (not
printable ASCII, or longer than 64 bytes) or no longer matches the
configuration; such subjects are listed after the others, with what they
used in their most used window and why, at most -n of them.

  atrl top -config plugin.yaml -n 5

A file of several configurations (a WasmPlugin manifest) lists each
configuration's subjects under its name, at most -n of each (-rule: one).

-json prints a list of objects, the subjects with limits first:

  [{"rule_item":0,"value":"sk-1","kind":"tokens","window":"minute","limit":1000,
    "used":900,"remaining":100,"fraction":0.9,"redis_key":"atrl:{chat|limit_by_per_header|x-api-key|sk-1}"}]

with "config" naming the configuration in a file of several
("defaultConfig", "matchRules[0] (ingress default/llm-chat)"), "threshold"
in place of "rule_item" for the thresholds, "model" for a
per_model subject, "overridden": true for an override, a money window's
(kind "usd") "limit", "used" and "remaining" in US dollars, and for a
subject whose limits are unknown "limit", "remaining" and "fraction" null
and a "note".

Flags:

  -n N
	how many subjects to print (default 10)
  -scan-limit N
	look at no more than N of the rule's keys, on all nodes (default 100000)
`+connFlagsHelp)
}
