// Package quota is what the plugin's quota endpoints (quota_path, the
// admin API) and the atrl CLI share: how an operator names a subject and
// what to do to it (Request, read from the admin API's JSON body or query
// string, or built from the CLI's flags), the script subjects an operation
// acts on (Request.Plan), and the status document both show (Document).
// It calls no proxy-wasm host function itself: the calls it plans go
// through scripts.
package quota

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Document is the status of subjects, as the quota endpoints answer it and
// `atrl status --json` prints it. Field names are fixed: clients rely on
// them.
type Document struct {
	Subjects []Subject `json:"subjects"`
	// Price is the price of the model a quota request names, when the
	// configuration prices requests (PriceOf).
	Price *ModelPrice `json:"price,omitempty"`
}

// ModelPrice is what a model's tokens cost, as the plugin charges money
// windows for them, and where that price comes from.
type ModelPrice struct {
	Model string `json:"model"`
	// Source is pricing (an entry of the configuration's pricing: Entry
	// names it, "*" for the one that prices every other model), catalog
	// (the price catalog lists it: ListedAs is its provider/model there),
	// unlisted (no one lists it: its provider's dearest catalog price,
	// Provider) or unknown_model (a route whose model cannot be told).
	Source   string `json:"source"`
	Entry    string `json:"entry,omitempty"`
	ListedAs string `json:"listed_as,omitempty"`
	Provider string `json:"provider,omitempty"`
	// USDPerMillionTokens is the price of each kind of token; above
	// LongContextAbove input tokens a request is priced at LongContext.
	USDPerMillionTokens PriceKinds  `json:"usd_per_million_tokens"`
	LongContextAbove    int64       `json:"long_context_above_tokens,omitempty"`
	LongContext         *PriceKinds `json:"long_context_usd_per_million_tokens,omitempty"`
}

// PriceKinds is a price of each kind of token, in US dollars per million
// tokens.
type PriceKinds struct {
	Input       json.Number `json:"input"`
	Output      json.Number `json:"output"`
	CacheRead   json.Number `json:"cache_read"`
	CacheWrite  json.Number `json:"cache_write"`
	Reasoning   json.Number `json:"reasoning"`
	InputAudio  json.Number `json:"input_audio"`
	OutputAudio json.Number `json:"output_audio"`
	InputImage  json.Number `json:"input_image"`
	OutputImage json.Number `json:"output_image"`
}

// PriceOf is the price of a model served on a route of provider
// (config.PriceProvider), as rules price it; nil when they price no
// request, or nothing prices the model.
func PriceOf(rules *config.Config, model, provider string) *ModelPrice {
	if !rules.Pricing.Priced() {
		return nil
	}
	price, source, ok := rules.Pricing.PriceOf(model, provider)
	if !ok {
		return nil
	}
	mp := &ModelPrice{Model: model, USDPerMillionTokens: priceKinds(price)}
	switch source.From {
	case config.FromEntry:
		mp.Source, mp.Entry = "pricing", source.Key
	case config.FromAny:
		mp.Source, mp.Entry = "pricing", config.AnyKey
	case config.FromCatalog:
		mp.Source, mp.ListedAs = "catalog", source.Provider+"/"+source.Model
	case config.FromDearest:
		mp.Source, mp.Provider = "unlisted", source.Provider
	case config.FromStrictest:
		mp.Source, mp.Provider = "unknown_model", source.Provider
	}
	if price.Long != nil {
		long := priceKinds(*price.Long)
		mp.LongContextAbove, mp.LongContext = price.LongAbove, &long
	}
	return mp
}

func priceKinds(p pricing.Price) PriceKinds {
	n := func(pico int64) json.Number { return json.Number(pricing.DollarsPerMillion(pico)) }
	return PriceKinds{Input: n(p.Input), Output: n(p.Output), CacheRead: n(p.CacheRead), CacheWrite: n(p.CacheWrite),
		Reasoning: n(p.Reasoning), InputAudio: n(p.InputAudio), OutputAudio: n(p.OutputAudio),
		InputImage: n(p.InputImage), OutputImage: n(p.OutputImage)}
}

// Subject is one limited subject and its limits.
type Subject struct {
	Name
	// Merged names the other limit keys that name the same subject, whose
	// limits are merged into its own (see config.Shared): rule items of one
	// type reading one source whose keys all match its value. Absent when
	// none.
	Merged []Name  `json:"merged,omitempty"`
	Limits []Limit `json:"limits"`
}

// Name names a subject as the quota document, the admin API and budget
// alerts do.
type Name struct {
	// RuleItem is the index of its rule item in rule_items; absent for the
	// thresholds, which Threshold names instead.
	RuleItem  *int   `json:"rule_item,omitempty"`
	Threshold string `json:"threshold,omitempty"`
	// Key is the limit key that matched ("*" for the thresholds), Value
	// the value that names the subject ("" for the thresholds).
	Key   string `json:"key"`
	Value string `json:"value"`
	// Model is set on limits that depend on the model: a per_model entry
	// (ModelKey is its pattern, within the subject Key and Value name) or a
	// limit_by_model / limit_by_per_model item.
	Model    string `json:"model,omitempty"`
	ModelKey string `json:"model_key,omitempty"`
}

// NameOf names the subject of a match (as Config.MatchAll or
// Config.Resolve return it).
func NameOf(rules *config.Config, m config.Match) Name { return nameOf(rules, m, false) }

// ShownNameOf names the subject of a match as logs, budget alerts and the
// admin API show it: as NameOf, but a value read from a credential, and a
// key that names one, as their fingerprints (see config.Match.ShownValue
// and ShownKey).
func ShownNameOf(rules *config.Config, m config.Match) Name { return nameOf(rules, m, true) }

// nameOf is NameOf, or with shown ShownNameOf.
func nameOf(rules *config.Config, m config.Match, shown bool) Name {
	key, value := m.Key, m.Value
	if m.Parent != nil { // a per_model entry: its parent's key, and its pattern
		key = m.Parent
	}
	s := Name{Key: key.Key, Value: value, Model: m.Model}
	if shown {
		s.Key, s.Value = m.ShownKey(key), m.ShownValue()
	}
	switch {
	case m.Unmatched:
		s.Threshold = config.UnmatchedThreshold
	case m.Item == nil:
		s.Threshold = config.GlobalThreshold
	default:
		n := -1
		for j := range rules.Items {
			if &rules.Items[j] == m.Item {
				n = j
			}
		}
		s.RuleItem = &n
	}
	if m.Parent != nil {
		s.ModelKey = m.Key.Key
	}
	return s
}

// Limit is one limit of a subject. Limit, Used and Remaining count tokens,
// requests, or for a money limit (KindUSD) nanodollars, which the JSON
// document writes in US dollars (see MarshalJSON).
type Limit struct {
	// Kind is "tokens", "requests", "usd" or "concurrent".
	Kind string `json:"kind"`
	// Window is "second", "minute", "hour" or "day"; absent for concurrent.
	Window string `json:"window,omitempty"`
	Limit  int64  `json:"limit"`
	// Used is what the window counts now; for concurrent, the requests in
	// progress.
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// ResetSeconds is when the window starts anew; absent for concurrent.
	ResetSeconds int64 `json:"reset_seconds,omitempty"`
	// Overridden says Limit is the subject's override, not the configured
	// limit.
	Overridden bool `json:"overridden,omitempty"`
	// Levels are, for a limit that keeps part of itself for higher
	// priority levels (reserve), each level's share of it and what is left
	// of that share, highest level first; absent otherwise.
	Levels []LevelShare `json:"levels,omitempty"`
}

// LevelShare is what of a limit a priority level may use.
type LevelShare struct {
	Level     string `json:"level"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
}

// Kind names, as Limit.Kind and Request.Kind write them.
const (
	KindTokens     = "tokens"
	KindRequests   = "requests"
	KindConcurrent = "concurrent"
	KindUSD        = "usd" // a money window (usd_per_*)
)

// KindName is the name of a kind of limit, as the document writes it.
func KindName(k budget.Kind) string { return kindNames[k] }

// kindNames names every budget.Kind.
var kindNames = [...]string{budget.KindTokens: KindTokens, budget.KindRequests: KindRequests, budget.KindConcurrent: KindConcurrent,
	budget.KindUSD: KindUSD}

// Amount writes an amount of a limit of kind as the document does: a
// count, or for KindUSD nanodollars as US dollars, exactly ("20",
// "0.00987").
func Amount(kind string, n int64) json.Number {
	if kind == KindUSD {
		return json.Number(config.FormatUSD(n))
	}
	return json.Number(strconv.FormatInt(n, 10))
}

// limitJSON is a Limit as the document writes it: the same fields, the
// amounts written by Amount. For every kind but KindUSD its encoding is
// byte for byte the one of a Limit without methods.
type limitJSON struct {
	Kind         string      `json:"kind"`
	Window       string      `json:"window,omitempty"`
	Limit        json.Number `json:"limit"`
	Used         json.Number `json:"used"`
	Remaining    json.Number `json:"remaining"`
	ResetSeconds int64       `json:"reset_seconds,omitempty"`
	Overridden   bool        `json:"overridden,omitempty"`
	Levels       []levelJSON `json:"levels,omitempty"`
}

// levelJSON is a LevelShare as the document writes it.
type levelJSON struct {
	Level     string      `json:"level"`
	Limit     json.Number `json:"limit"`
	Remaining json.Number `json:"remaining"`
}

// MarshalJSON writes a money limit's limit, used and remaining in US
// dollars, as JSON numbers with no float rounding (20, 0.00987); other
// limits as their counts.
func (l Limit) MarshalJSON() ([]byte, error) {
	j := limitJSON{Kind: l.Kind, Window: l.Window, Limit: Amount(l.Kind, l.Limit), Used: Amount(l.Kind, l.Used),
		Remaining: Amount(l.Kind, l.Remaining), ResetSeconds: l.ResetSeconds, Overridden: l.Overridden}
	for _, s := range l.Levels {
		j.Levels = append(j.Levels, levelJSON{Level: s.Level, Limit: Amount(l.Kind, s.Limit), Remaining: Amount(l.Kind, s.Remaining)})
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON writes: a money limit's dollars
// back into nanodollars, exactly.
func (l *Limit) UnmarshalJSON(b []byte) error {
	var j limitJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	out := Limit{Kind: j.Kind, Window: j.Window, ResetSeconds: j.ResetSeconds, Overridden: j.Overridden}
	for _, s := range j.Levels {
		share := LevelShare{Level: s.Level}
		var err error
		if share.Limit, err = amountOf(j.Kind, s.Limit); err == nil {
			share.Remaining, err = amountOf(j.Kind, s.Remaining)
		}
		if err != nil {
			return errors.New("quota: level " + s.Level + ": " + err.Error())
		}
		out.Levels = append(out.Levels, share)
	}
	for _, a := range [...]struct {
		name string
		in   json.Number
		out  *int64
	}{{"limit", j.Limit, &out.Limit}, {"used", j.Used, &out.Used}, {"remaining", j.Remaining, &out.Remaining}} {
		if a.in == "" { // absent or null, as for an int64 field
			continue
		}
		var err error
		if j.Kind == KindUSD {
			*a.out, err = parseUSD(string(a.in))
		} else {
			*a.out, err = strconv.ParseInt(string(a.in), 10, 64)
		}
		if err != nil {
			return errors.New("quota: limit " + a.name + ": " + err.Error())
		}
	}
	*l = out
	return nil
}

// amountOf reads an amount Amount wrote for a limit of kind.
func amountOf(kind string, n json.Number) (int64, error) {
	if kind == KindUSD {
		return parseUSD(string(n))
	}
	return strconv.ParseInt(string(n), 10, 64)
}

// parseUSD reads US dollars as config.FormatUSD writes them (a decimal
// number with at most nine decimals) into nanodollars, exactly.
func parseUSD(s string) (int64, error) {
	bad := errors.New(strconv.Quote(s) + " is not US dollars to the nanodollar")
	digits := strings.TrimPrefix(s, "-")
	whole, frac, point := strings.Cut(digits, ".")
	if whole == "" || point && frac == "" || len(frac) > 9 || strings.Trim(whole+frac, "0123456789") != "" {
		return 0, bad
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > (1<<63-1)/config.NanoPerDollar-1 {
		return 0, bad
	}
	n := w * config.NanoPerDollar
	if frac != "" {
		f, _ := strconv.ParseInt((frac + "000000000")[:9], 10, 64)
		n += f
	}
	if len(digits) < len(s) {
		n = -n
	}
	return n, nil
}

// Describe is the document of matches (as Config.MatchAll or
// Config.Resolve return them) whose limits status.lua read: statuses[i]
// are the limits of matches[i]. Subjects are named by NameOf, or with
// shown by ShownNameOf (a credential fingerprinted): the raw value is for
// the client's own quota request, and an operator's tool.
func Describe(rules *config.Config, matches []config.Match, statuses [][]budget.LimitStatus, shown bool) Document {
	name := NameOf
	if shown {
		name = ShownNameOf
	}
	d := Document{Subjects: make([]Subject, 0, len(matches))}
	for i, m := range matches {
		s := Subject{Name: name(rules, m), Limits: make([]Limit, 0, len(statuses[i]))}
		for _, o := range m.Merged()[1:] {
			s.Merged = append(s.Merged, name(rules, o))
		}
		windows := m.Windows()
		for j, l := range statuses[i] {
			out := Limit{Kind: kindNames[l.Kind], Limit: l.Limit, Used: l.Used, Remaining: l.Remaining(), Overridden: l.Overridden}
			if l.Kind != budget.KindConcurrent {
				out.Window, out.ResetSeconds = config.WindowName(l.Seconds), l.Reset
			}
			if p := rules.Priority; p != nil {
				open := func(level int) int64 { return m.ConcurrentOpen(level) }
				if j < len(windows) {
					open = windows[j].Open
				}
				out.Levels = levelShares(p, l, open)
			}
			s.Limits = append(s.Limits, out)
		}
		d.Subjects = append(d.Subjects, s)
	}
	return d
}

// levelShares are each level's share of a limit whose share open to a
// level is open(level) percent, and what is left of it; nil when every
// level may use all of it.
func levelShares(p *config.Priority, l budget.LimitStatus, open func(level int) int64) []LevelShare {
	if open(len(p.Levels)-1) >= 100 { // the lowest level has all of it: so has every level
		return nil
	}
	shares := make([]LevelShare, len(p.Levels))
	for level, name := range p.Levels {
		limit := config.Share(l.Limit, open(level))
		shares[level] = LevelShare{Level: name, Limit: limit, Remaining: max(limit-l.Used, 0)}
	}
	return shares
}

// Options are the script options of a configuration: its window type, its
// lease length, whether overrides are read.
func Options(rules *config.Config) scripts.Options {
	return scripts.Options{Sliding: rules.WindowType == config.Sliding, LeaseSeconds: rules.LeaseSeconds, Overrides: rules.LimitOverrides,
		Calendar: &rules.Calendar}
}

// Op is an operation on a subject.
type Op uint8

const (
	OpStatus          Op = iota + 1 // read its status
	OpReset                         // clear its windows, all or some
	OpGrant                         // give tokens back in its token windows
	OpSetOverrides                  // replace its limit overrides
	OpRemoveOverrides               // remove its limit overrides
)

// Request is an operator's operation on one subject.
type Request struct {
	Op  Op
	Ref config.SubjectRef
	// Window (seconds) and Kind (KindTokens, KindRequests, KindUSD)
	// narrow a reset to the windows of that length, of that kind, and a
	// grant (of token windows only) to the windows of that length; 0 and ""
	// for all.
	Window int64
	Kind   string
	// Tokens is what a grant gives back, in [1, config.MaxLimit].
	Tokens int64
	// Limits are the overrides to set: configuration field names
	// (token_per_day, query_per_minute, usd_per_day,
	// max_concurrent_requests) and limits, in the order given.
	Limits []FieldLimit
}

// FieldLimit is an override as an operator writes it: a limit in [1,
// config.MaxLimit], or for a money window (usd_per_*) nanodollars in [1,
// config.MaxUSDLimit dollars].
type FieldLimit struct {
	Field string
	Limit int64
}

// isUSD says whether the limit is a money window's, in nanodollars.
func (l FieldLimit) isUSD() bool {
	unit, _, ok := config.WindowOf(l.Field)
	return ok && unit == config.UnitUSD
}

// Value is the limit as the admin API and atrl write it: a count, or for
// a money window US dollars ("50", "0.25").
func (l FieldLimit) Value() json.Number {
	if l.isUSD() {
		return Amount(KindUSD, l.Limit)
	}
	return Amount(KindTokens, l.Limit)
}

// maxNanoUSD is the largest money override, config.MaxUSDLimit dollars.
const maxNanoUSD = config.MaxUSDLimit * config.NanoPerDollar

// check refuses a limit out of its range.
func (l FieldLimit) check() error {
	if l.isUSD() {
		if l.Limit < 1 || l.Limit > maxNanoUSD {
			return badUSD(l.Field, config.FormatUSD(l.Limit))
		}
		return nil
	}
	if l.Limit < 1 || l.Limit > config.MaxLimit {
		return badLimit(l.Field, strconv.FormatInt(l.Limit, 10))
	}
	return nil
}

// badLimit and badUSD refuse an override's limit, as given (got).
func badLimit(field, got string) error {
	return badRequest("limits.", truncate(field), ": must be an integer between 1 and ", strconv.FormatInt(config.MaxLimit, 10), ", got ", truncate(got))
}

func badUSD(field, got string) error {
	return badRequest("limits.", truncate(field), ": must be a number of US dollars, more than 0 and at most ",
		strconv.Itoa(config.MaxUSDLimit), ", got ", truncate(got))
}

// BadRequest is an operation that cannot be done as asked: the message
// says what is wrong, for a 400 answer or the CLI's error.
type BadRequest struct{ Msg string }

func (e *BadRequest) Error() string { return e.Msg }

func badRequest(msg ...string) error {
	n := 0
	for _, m := range msg {
		n += len(m)
	}
	b := make([]byte, 0, n)
	for _, m := range msg {
		b = append(b, m...)
	}
	return &BadRequest{Msg: string(b)}
}

// Plan is what a Request does, under a configuration.
type Plan struct {
	// Matches are the subject's limits, as a request would meet them (with
	// a model, its per_model match last): the status shows them all.
	Matches []config.Match
	// Status reads the status of Matches (one slot).
	Status []budget.Subject
	// Target is the subject the operation changes (the per_model one when
	// a model is named), with the windows it acts on.
	Target budget.Subject
	// Overrides are a set's, as the scripts name them.
	Overrides []scripts.Override
}

// Plan resolves the request's subject and checks the operation against
// it: the windows a reset or grant acts on exist, the overrides name
// limits the subject has. Its errors are *BadRequest (with
// config.ErrNoSuchSubject wrapped when the subject does not exist).
func (r Request) Plan(rules *config.Config) (Plan, error) {
	matches, err := rules.Resolve(r.Ref)
	if err != nil {
		return Plan{}, &BadRequest{Msg: err.Error()}
	}
	p := Plan{Matches: matches}
	for _, m := range matches {
		p.Status = append(p.Status, budget.SubjectOf(rules, m))
	}
	target := matches[len(matches)-1]
	p.Target = budget.SubjectOf(rules, target)
	p.Target.Suffix = 0 // sent alone: a key of its own
	switch r.Op {
	case OpReset, OpGrant:
		p.Target.Windows = nil
		for _, w := range target.Windows() {
			if r.actsOn(w) {
				p.Target.Windows = append(p.Target.Windows, w)
			}
		}
		if len(p.Target.Windows) == 0 {
			return Plan{}, badRequest("the subject has no ", describeWindows(r), " to ", opVerb[r.Op])
		}
	case OpSetOverrides:
		if !rules.LimitOverrides {
			return Plan{}, badRequest("limit_overrides is off in this configuration: an override would not apply")
		}
		if len(r.Limits) == 0 {
			return Plan{}, badRequest("limits: name at least one limit to override (removing them all is a DELETE, or `override rm`)")
		}
		for _, l := range r.Limits {
			name, err := overrideName(&target, l.Field)
			if err != nil {
				return Plan{}, err
			}
			if err := l.check(); err != nil {
				return Plan{}, err
			}
			p.Overrides = append(p.Overrides, scripts.Override{Name: name, Limit: l.Limit})
		}
	}
	return p, nil
}

// actsOn says whether a reset or grant acts on a window: a grant on token
// windows only; Window and Kind narrow either.
func (r Request) actsOn(w config.Window) bool {
	if r.Window != 0 && w.Seconds != r.Window {
		return false
	}
	switch {
	case r.Op == OpGrant || r.Kind == KindTokens:
		return w.Unit == config.UnitTokens
	case r.Kind == KindRequests:
		return w.Unit == config.UnitRequests
	case r.Kind == KindUSD:
		return w.Unit == config.UnitUSD
	}
	return true
}

var opVerb = [...]string{OpReset: "reset", OpGrant: "grant tokens in"}

// describeWindows names the windows a reset or grant asked for.
func describeWindows(r Request) string {
	s := "window"
	switch {
	case r.Op == OpGrant || r.Kind == KindTokens:
		s = "token window"
	case r.Kind == KindRequests:
		s = "request window"
	case r.Kind == KindUSD:
		s = "money window"
	}
	if r.Window != 0 {
		return config.WindowName(r.Window) + " " + s
	}
	return s
}

// overrideName checks that an override names a limit the key configures,
// and returns its name in the scripts.
func overrideName(m *config.Match, field string) (string, error) {
	if field == config.MaxConcurrentField {
		if m.MaxConcurrent() == 0 {
			return "", badRequest("limits.", field, ": the subject's key ", strconv.Quote(m.Key.Key), " has no ", field, " to override (an override changes a configured limit, never adds one)")
		}
		return scripts.ConcurrencyOverride, nil
	}
	unit, seconds, ok := config.WindowOf(field)
	if !ok {
		return "", badRequest("limits.", field, ": unknown limit; overrides take token_per_*, query_per_*, usd_per_* and ", config.MaxConcurrentField)
	}
	for _, w := range m.Windows() {
		if w.Unit == unit && w.Seconds == seconds {
			return scripts.OverrideName(unit, seconds), nil
		}
	}
	return "", badRequest("limits.", field, ": the subject's key ", strconv.Quote(m.Key.Key), " has no ", field, " to override (an override changes a configured limit, never adds one)")
}

// Fields returns overrides as an operator writes them: configuration field
// names, for the CLI's list. Names the configuration does not know (a
// window removed from it since) are kept as they are in Redis.
func Fields(overrides []scripts.Override) []FieldLimit {
	out := make([]FieldLimit, 0, len(overrides))
	for _, o := range overrides {
		field := o.Name
		if o.Name == scripts.ConcurrencyOverride {
			field = config.MaxConcurrentField
		} else if len(o.Name) > 1 {
			unit, ok := specUnits[o.Name[0]]
			if n, err := strconv.ParseInt(o.Name[1:], 10, 64); ok && err == nil && config.LimitField(unit, n) != "" && scripts.OverrideName(unit, n) == o.Name {
				field = config.LimitField(unit, n)
			}
		}
		out = append(out, FieldLimit{Field: field, Limit: o.Limit})
	}
	return out
}

// specUnits are the units of windows by the letter the scripts name them
// with ("t60", "q3600", "u86400").
var specUnits = map[byte]config.Unit{'t': config.UnitTokens, 'q': config.UnitRequests, 'u': config.UnitUSD}

// IsBadRequest says whether err is the operator's mistake (400), not
// Redis's trouble.
func IsBadRequest(err error) bool {
	var b *BadRequest
	return errors.As(err, &b)
}
