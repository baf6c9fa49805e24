package quota

import (
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// MaxBodyBytes bounds an admin request's body: a subject and a few limits.
const MaxBodyBytes = 64 << 10

// The fields of an admin request, and the operations that take them.
var requestFields = []struct {
	name string
	ops  []Op // nil: every operation
}{
	{"rule_item", nil},
	{"threshold", nil},
	{"value", nil},
	{"model", nil},
	{"window", []Op{OpReset, OpGrant}},
	{"kind", []Op{OpReset}},
	{"tokens", []Op{OpGrant}},
	{"usd", []Op{OpGrant}}, // refused, saying why
	{"limits", []Op{OpSetOverrides}},
}

// ParseRequest reads an admin API request of op: its subject and
// parameters from the JSON body, an object, or, when there is no body,
// from the query string (without its '?'). Unknown fields, fields the
// operation does not take, repeated ones and values of the wrong type or
// out of range are refused with a *BadRequest naming the field.
func ParseRequest(op Op, body []byte, query string) (Request, error) {
	fields := map[string]gjson.Result{}
	if len(body) > 0 {
		if !gjson.ValidBytes(body) {
			return Request{}, badRequest("the body is not valid JSON")
		}
		obj := gjson.ParseBytes(body)
		if !obj.IsObject() {
			return Request{}, badRequest("the body must be a JSON object")
		}
		var err error
		obj.ForEach(func(k, v gjson.Result) bool {
			if _, dup := fields[k.Str]; dup {
				err = badRequest(k.Str, ": given twice")
				return false
			}
			fields[k.Str] = v
			return true
		})
		if err != nil {
			return Request{}, err
		}
	} else {
		values, err := url.ParseQuery(query)
		if err != nil {
			return Request{}, badRequest("the query string is malformed: ", err.Error())
		}
		for k, vs := range values {
			if len(vs) > 1 {
				return Request{}, badRequest(k, ": given twice")
			}
			fields[k] = queryValue(k, vs[0])
		}
	}
	return readRequest(op, fields)
}

// queryValue reads a query parameter as the JSON value it stands for:
// numbers for the numeric fields (when they are numbers), text otherwise.
func queryValue(name, v string) gjson.Result {
	if name == "rule_item" || name == "tokens" {
		if _, err := strconv.ParseInt(v, 10, 64); err == nil {
			return gjson.Parse(v)
		}
	}
	return gjson.Result{Type: gjson.String, Str: v, Raw: strconv.Quote(v)}
}

func readRequest(op Op, fields map[string]gjson.Result) (Request, error) {
	r := Request{Op: op}
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names) // the first wrong one, whatever the map's order
	for _, name := range names {
		known := false
		for _, f := range requestFields {
			if f.name != name {
				continue
			}
			known = true
			if f.ops != nil && !hasOp(f.ops, op) {
				return r, badRequest(name, ": not taken by this operation")
			}
		}
		if !known {
			return r, badRequest(name, ": unknown field")
		}
	}
	var err error
	str := func(name string) string {
		v, ok := fields[name]
		if !ok || err != nil {
			return ""
		}
		if v.Type != gjson.String {
			err = badRequest(name, ": must be a string, got ", v.Raw)
		}
		return v.Str
	}
	integer := func(name string, min, max int64) int64 {
		v, ok := fields[name]
		if !ok || err != nil {
			return 0
		}
		n, ok := intValue(v)
		if !ok || n < min || n > max {
			err = badRequest(name, ": must be an integer between ", strconv.FormatInt(min, 10), " and ", strconv.FormatInt(max, 10), ", got ", truncate(v.Raw))
		}
		return n
	}
	_, hasItem := fields["rule_item"]
	r.Ref.Item = int(integer("rule_item", 0, math.MaxInt32))
	r.Ref.Threshold = str("threshold")
	r.Ref.Value = str("value")
	r.Ref.Model = str("model")
	window := str("window")
	r.Kind = str("kind")
	r.Tokens = integer("tokens", 1, config.MaxLimit)
	if err != nil {
		return r, err
	}
	switch t := r.Ref.Threshold; {
	case hasItem && t != "":
		return r, badRequest("rule_item and threshold: name the subject by one of them")
	case t != "" && t != config.GlobalThreshold && t != config.UnmatchedThreshold:
		return r, badRequest("threshold: must be ", config.GlobalThreshold, " or ", config.UnmatchedThreshold, ", got ", strconv.Quote(truncate(t)))
	case t != "" && r.Ref.Value != "":
		return r, badRequest("value: a threshold has no value")
	case !hasItem && t == "":
		return r, badRequest("rule_item: required (the index of the subject's rule item in rule_items), or threshold")
	case hasItem && r.Ref.Value == "":
		return r, badRequest("value: required (the value a request of the subject carries)")
	}
	if window != "" {
		if r.Window = config.WindowSeconds(window); r.Window == 0 {
			return r, badRequest("window: must be second, minute, hour, day, week or month, got ", strconv.Quote(truncate(window)))
		}
	}
	if r.Kind != "" && r.Kind != KindTokens && r.Kind != KindRequests && r.Kind != KindUSD {
		return r, badRequest("kind: must be ", KindTokens, ", ", KindRequests, " or ", KindUSD, ", got ", strconv.Quote(truncate(r.Kind)))
	}
	if _, ok := fields["usd"]; ok {
		// Giving money back would need its amount beside the tokens in the
		// grant's call; a reset of the money windows or an override of
		// usd_per_* does what an operator needs.
		return r, badRequest("usd: a grant gives back tokens only; to give a subject money back, reset its money windows ",
			`("kind":"usd") or raise its usd_per_* limit with an override`)
	}
	if op == OpGrant && r.Tokens == 0 {
		return r, badRequest("tokens: required (how many tokens to give back)")
	}
	if op == OpSetOverrides {
		return r, r.readLimits(fields["limits"])
	}
	return r, nil
}

// readLimits reads the limits of an override set: an object from limit
// fields to integers, or for money windows (usd_per_*) to numbers of US
// dollars, held in nanodollars (their checks against the subject are
// Plan's).
func (r *Request) readLimits(v gjson.Result) (err error) {
	if !v.Exists() {
		return badRequest(`limits: required, e.g. {"token_per_day": 5000}`)
	}
	if !v.IsObject() {
		return badRequest("limits: must be an object from limits to integers, got ", truncate(v.Raw))
	}
	v.ForEach(func(k, l gjson.Result) bool {
		for _, seen := range r.Limits {
			if seen.Field == k.Str {
				err = badRequest("limits.", k.Str, ": given twice")
				return false
			}
		}
		limit := FieldLimit{Field: k.Str}
		if limit.isUSD() {
			limit.Limit, err = readUSD(k.Str, l)
		} else if n, ok := intValue(l); !ok || n < 1 || n > config.MaxLimit {
			err = badLimit(k.Str, l.Raw)
		} else {
			limit.Limit = n
		}
		r.Limits = append(r.Limits, limit)
		return err == nil
	})
	return err
}

// readUSD reads a money limit: US dollars, a number in (0,
// config.MaxUSDLimit], rounded to the nanodollar (at least one, as the
// configuration's usd_per_* are).
func readUSD(field string, v gjson.Result) (int64, error) {
	if v.Type != gjson.Number || !(v.Num > 0 && v.Num <= config.MaxUSDLimit) {
		return 0, badUSD(field, v.Raw)
	}
	return max(int64(math.Round(v.Num*config.NanoPerDollar)), 1), nil
}

func hasOp(ops []Op, op Op) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// intValue returns the integer a JSON number holds, if it is integral and
// fits in an int64 (1e3 and 1000.0 are 1000).
func intValue(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	f := v.Float()
	if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, true
	}
	return int64(f), true
}

// truncate shortens what a client sent for an error message.
func truncate(s string) string {
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}

// String is the request as the admin API takes it, in JSON (its body's
// field names): how the plugin's log names an admin action.
func (r Request) String() string { return r.string(r.Ref.Value) }

// Shown writes the request as String does, for a log line: a value the
// rule item reads from a credential as its fingerprint (see
// config.RuleItem.Secret).
func (r Request) Shown(rules *config.Config) string {
	v := r.Ref.Value
	if r.Ref.Threshold == "" && r.Ref.Item >= 0 && r.Ref.Item < len(rules.Items) && rules.Items[r.Ref.Item].Secret && v != "" {
		v = config.Fingerprint(v)
	}
	return r.string(v)
}

// string writes the request with the subject's value v.
func (r Request) string(v string) string {
	var item *int
	if r.Ref.Threshold == "" {
		item = &r.Ref.Item
	}
	var window string
	if r.Window != 0 {
		window = config.WindowName(r.Window)
	}
	var limits map[string]json.Number
	if len(r.Limits) > 0 {
		limits = make(map[string]json.Number, len(r.Limits))
		for _, l := range r.Limits {
			limits[l.Field] = l.Value()
		}
	}
	b, _ := json.Marshal(struct {
		RuleItem  *int                   `json:"rule_item,omitempty"`
		Threshold string                 `json:"threshold,omitempty"`
		Value     string                 `json:"value,omitempty"`
		Model     string                 `json:"model,omitempty"`
		Window    string                 `json:"window,omitempty"`
		Kind      string                 `json:"kind,omitempty"`
		Tokens    int64                  `json:"tokens,omitempty"`
		Limits    map[string]json.Number `json:"limits,omitempty"`
	}{item, r.Ref.Threshold, v, r.Ref.Model, window, r.Kind, r.Tokens, limits})
	return string(b)
}
