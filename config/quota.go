package config

// The quota endpoints' configuration (quota_path, admin, limit_overrides)
// and the naming of one subject as an operator names it (SubjectRef), which
// the admin API and the CLI resolve to the limits a request would meet.

import (
	"encoding/hex"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Admin is the admin section: where the admin API answers and who may call
// it.
type Admin struct {
	// Path is the prefix of the admin operations ({Path}/status, …).
	Path string
	// Consumer, when not "", is the Higress consumer (ConsumerHeader, set by
	// an auth plugin) allowed to call the API.
	Consumer string
	// Header, when not "", is the lower-cased name of the request header
	// whose value's SHA-256 must be TokenSHA256.
	Header      string
	TokenSHA256 [32]byte
}

// adminFields is the table of admin.
var adminFields = fields[Admin]{
	required(customField("path", func(a *Admin, path string, v gjson.Result) (err error) {
		a.Path, err = readEndpointPath(path, v)
		return err
	})),
	nonEmptyStringField("consumer", func(a *Admin, s string) { a.Consumer = s }),
	customField("header", func(a *Admin, path string, v gjson.Result) error {
		s, err := readNonEmptyString(path, v)
		if err == nil && (!validHeaderName(s) || strings.HasPrefix(s, ":")) {
			err = fieldErr(path, "invalid header name ", quote(s))
		}
		a.Header = strings.ToLower(s)
		return err
	}),
	customField("token_sha256", func(a *Admin, path string, v gjson.Result) error {
		s, err := readNonEmptyString(path, v)
		if err != nil {
			return err
		}
		if n, err := hex.Decode(a.TokenSHA256[:], []byte(s)); err != nil || n != len(a.TokenSHA256) || len(s) != 2*len(a.TokenSHA256) {
			return fieldErr(path, "must be the SHA-256 of the admin token, 64 hex digits (`printf %s \"$TOKEN\" | sha256sum`), got ", quote(s))
		}
		return nil
	}),
}

// readAdmin reads admin and checks that it lets someone in.
func readAdmin(c *Config, path string, v gjson.Result) error {
	a := &Admin{}
	if err := adminFields.read(a, path, v); err != nil {
		return err
	}
	hasToken := a.TokenSHA256 != [32]byte{}
	switch {
	case a.Header != "" && !hasToken:
		return fieldErr(child(path, "token_sha256"), "required with header: the SHA-256 of the token the header must carry")
	case a.Header == "" && hasToken:
		return fieldErr(child(path, "header"), "required with token_sha256: the header that carries the token")
	case a.Consumer == "" && a.Header == "":
		return fieldErr(path, "needs consumer, or header with token_sha256: who may call the admin API")
	}
	c.Admin = a
	return nil
}

// readQuotaPath reads quota_path.
func readQuotaPath(c *Config, path string, v gjson.Result) (err error) {
	c.QuotaPath, err = readEndpointPath(path, v)
	return err
}

// readEndpointPath reads the path of an endpoint the plugin answers itself:
// absolute, without a query, a fragment or a trailing '/', and written as
// routers read it (CanonicalPath), which is how requests' paths are
// compared with it.
func readEndpointPath(path string, v gjson.Result) (string, error) {
	s, err := readNonEmptyString(path, v)
	switch {
	case err != nil:
		return "", err
	case s[0] != '/' || strings.ContainsAny(s, "?# \t") || s[len(s)-1] == '/':
		return "", fieldErr(path, "must be a path starting with '/', without a query, spaces or a trailing '/' (nor '/' alone: every request would be the plugin's), got ", quote(s))
	case CanonicalPath(s) != s:
		return "", fieldErr(path, "must be written as routers read it (escapes decoded, no '//', '.' or '..'): ", quote(CanonicalPath(s)), ", got ", quote(s))
	}
	return s, nil
}

// checkQuotaEndpoints refuses a quota_path inside the admin API's paths
// (or the reverse): a request must reach one of them only.
func (c *Config) checkQuotaEndpoints() error {
	if c.QuotaPath == "" || c.Admin == nil {
		return nil
	}
	q, a := c.QuotaPath+"/", c.Admin.Path+"/"
	if strings.HasPrefix(q, a) || strings.HasPrefix(a, q) {
		return fieldErr("quota_path", "must be outside admin.path ", quote(c.Admin.Path), " (and the reverse), got ", quote(c.QuotaPath))
	}
	return nil
}

// Thresholds, as a SubjectRef names them.
const (
	GlobalThreshold    = globalField
	UnmatchedThreshold = unmatchedField
)

// SubjectRef names one limited subject as an operator does: by its rule
// item and the value a request would carry (or by a threshold), and, for a
// per_model limit within it, the model.
type SubjectRef struct {
	// Item is the index of the rule item in rule_items; ignored when
	// Threshold is set.
	Item int
	// Threshold is GlobalThreshold or UnmatchedThreshold for those limits,
	// "" for a rule item.
	Threshold string
	// Value is what a request would carry: the header, parameter, cookie or
	// consumer value, the client IP (or, for an IPv6 client, its network as
	// the status shows it), the model for the model types. Ignored for
	// thresholds.
	Value string
	// Model, when not "", narrows the subject to the per_model entry of its
	// key that matches the model. For the model types it may be "" (the
	// value is the model) or the value.
	Model string
}

// ErrNoSuchSubject is wrapped by Resolve's errors: the reference names
// nothing the configuration limits. The message says why.
var ErrNoSuchSubject = errors.New("no such subject")

type subjectError string

func (e subjectError) Error() string { return string(e) }
func (e subjectError) Unwrap() error { return ErrNoSuchSubject }

// Resolve returns the limits of the subject ref names, as a request with
// that value (and model) would be matched: the subject's own match and,
// with Model, the per_model match of that model within it (as
// Config.MatchAll appends them). With Model, the first is the parent. The
// other rule items whose keys name the same subject for that value are
// merged into it, as MatchAll merges them (see Shared).
func (c *Config) Resolve(ref SubjectRef) ([]Match, error) {
	var ms []Match
	switch {
	case ref.Threshold == GlobalThreshold && c.Global != nil:
		ms = []Match{{Key: c.Global}}
	case ref.Threshold == UnmatchedThreshold && c.Unmatched != nil:
		ms = []Match{c.unmatched()}
	case ref.Threshold != "":
		return nil, subjectError(ref.Threshold + " is not configured")
	case ref.Item < 0 || ref.Item >= len(c.Items):
		return nil, subjectError("rule item " + strconv.Itoa(ref.Item) + " does not exist: the rule has " + strconv.Itoa(len(c.Items)))
	default:
		it := &c.Items[ref.Item]
		m, ok := c.resolveItem(it, ref.Value)
		if !ok {
			return nil, subjectError("no key of rule item " + strconv.Itoa(ref.Item) + " (" + it.Type.String() + ") matches the value " + strconv.Quote(ref.Value))
		}
		ms = []Match{m}
		for i := range c.Items {
			if other := &c.Items[i]; other != it && other.Type == it.Type && other.Name == it.Name {
				if o, ok := c.resolveItem(other, ref.Value); ok && o.SameSubject(&m) {
					ms = append(ms, o)
				}
			}
		}
		if it.Type.ModelValued() {
			if ref.Model != "" && ref.Model != ref.Value {
				return nil, subjectError("rule item " + strconv.Itoa(ref.Item) + " limits by model: its value is the model, " + strconv.Quote(ref.Value) + ", not " + strconv.Quote(ref.Model))
			}
			ref.Model = "" // the value is the model: no per_model within it
		}
	}
	all := make([]Match, 0, 2)
	for _, m := range ms {
		all = appendMatch(all, 0, m, modelOnly(ref.Model))
	}
	if ref.Model == "" {
		return all, nil
	}
	key := strconv.Quote(ms[0].Key.Key)
	if !slices.ContainsFunc(ms, func(m Match) bool { return m.Key.PerModel != nil }) {
		return nil, subjectError("the subject's key " + key + " has no per_model limits")
	}
	if len(all) < 2 {
		return nil, subjectError("no per_model entry of the key " + key + " matches the model " + strconv.Quote(ref.Model))
	}
	return all, nil
}

// resolveItem matches a rule item against a value as an operator names
// it (see SubjectRef.Value).
func (c *Config) resolveItem(it *RuleItem, value string) (Match, bool) {
	switch {
	case it.Type == ByPerIP:
		return c.resolveIP(it, value)
	case !it.Type.PerValue():
		// A shared key's subject is the key: the status shows its text
		// as the value, and that text names it back.
		if m, ok := it.keyNamed(value); ok {
			return m, true
		}
	}
	return it.matchValue(value)
}

// keyNamed is the match of a shared-key item's key whose text is key
// ("gold", "regexp:^s", "*").
func (it *RuleItem) keyNamed(key string) (Match, bool) {
	for j := range it.Keys {
		if k := &it.Keys[j]; k.Key == key {
			return Match{Item: it, Key: k, Value: k.Key}, true
		}
	}
	return Match{}, false
}

// resolveIP matches a limit_by_per_ip item against an IP or, for the
// network an IPv6 client is limited as, the network written as the status
// shows it ("2001:db8::/64").
func (c *Config) resolveIP(it *RuleItem, value string) (Match, bool) {
	addr, ok := ParseIP(value)
	if !ok {
		p, err := netip.ParsePrefix(value)
		if err != nil || !p.Addr().Is6() {
			return Match{}, false
		}
		addr = p.Addr()
	}
	return c.matchAddr(it, addr)
}

// modelOnly is a request that names a model and nothing else.
type modelOnly string

func (m modelOnly) Header(string) string { return "" }
func (m modelOnly) Path() string         { return "" }
func (m modelOnly) PeerAddress() string  { return "" }
func (m modelOnly) Model() string        { return string(m) }

// WindowName is a window's length as the quota endpoints name it:
// "second", "minute", "hour" or "day".
func WindowName(seconds int64) string {
	for _, k := range windowKinds {
		if k.seconds == seconds {
			return k.field[strings.LastIndexByte(k.field, '_')+1:]
		}
	}
	return strconv.FormatInt(seconds, 10) + "s"
}

// WindowSeconds is the length of the window WindowName names, 0 for a name
// it never returns.
func WindowSeconds(name string) int64 {
	for _, k := range windowKinds {
		if WindowName(k.seconds) == name {
			return k.seconds
		}
	}
	return 0
}

// LimitField returns the configuration field of a window (token_per_minute,
// query_per_day), "" when there is none of that unit and length.
func LimitField(unit Unit, seconds int64) string {
	for _, k := range windowKinds {
		if k.unit == unit && k.seconds == seconds {
			return k.field
		}
	}
	return ""
}

// WindowOf returns the unit and length of a window field (token_per_*,
// query_per_*); ok is false for any other name.
func WindowOf(field string) (unit Unit, seconds int64, ok bool) {
	for _, k := range windowKinds {
		if k.field == field {
			return k.unit, k.seconds, true
		}
	}
	return 0, 0, false
}

// MaxConcurrentField names max_concurrent_requests, the limit overrides may
// set beside the windows.
const MaxConcurrentField = "max_concurrent_requests"
