package config

import (
	"errors"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// FieldError is the error returned by Parse. Path is the JSON path of the
// offending field, e.g. "rule_items[1].limit_keys[0].key", or "" for errors
// about the document as a whole.
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func fieldErr(path string, msg ...string) error {
	return &FieldError{Path: path, Msg: strings.Join(msg, "")}
}

// Field lists, used to refuse unknown fields and suggest corrections.
var (
	topFields = []string{
		"rule_name", "global_threshold", "rule_items", "rejected_code", "rejected_msg",
		"redis", "show_limit_quota_header", "failure_mode", "xff_num_trusted_hops",
		"rule_match_mode", reservationField, "token_count_strategy", weightsField,
		"window_type", "concurrency_lease_seconds", "over_limit_action", maxQueueWaitField,
	}
	redisFields = []string{"service_name", "service_port", "username", "password", "timeout", "database"}
)

func ruleItemFields() []string {
	f := make([]string, 0, len(limitTypes))
	for t := ByHeader; int(t) < len(limitTypes); t++ {
		f = append(f, t.String())
	}
	return append(f, "limit_keys")
}

func limitKeyFields() []string { return append([]string{"key"}, limitFields()...) }

// limitFields are the fields of a limit: its windows and max_concurrent_requests.
func limitFields() []string {
	f := make([]string, 0, len(windowKinds)+1)
	for _, w := range windowKinds {
		f = append(f, w.field)
	}
	return append(f, maxConcurrentField)
}

const (
	maxConcurrentField = "max_concurrent_requests"
	maxLeaseSeconds    = 7 * 86400
	maxQueueWaitField  = "max_queue_wait_ms"
	maxQueueWaitMs     = 600_000 // ten minutes: longer than any gateway lets a request wait
)

// ParseString parses a configuration given as JSON text.
func ParseString(json string) (*Config, error) {
	if !gjson.Valid(json) {
		return nil, fieldErr("", "invalid JSON")
	}
	return Parse(gjson.Parse(json))
}

// Parse parses and validates a configuration. On failure the error is a
// *FieldError naming the field and the bad value.
func Parse(json gjson.Result) (*Config, error) {
	if json.Raw != "" && !gjson.Valid(json.Raw) {
		return nil, fieldErr("", "invalid JSON")
	}
	if !json.IsObject() {
		return nil, fieldErr("", "configuration must be a JSON object, got ", describe(json))
	}
	var f struct {
		ruleName, global, items, code, msg, show, failure, hops, redis gjson.Result
		matchMode, reservation, strategy, weights                      gjson.Result
		windowType, lease, overLimit, queueWait                        gjson.Result
	}
	err := walkObject("", json, topFields, func(key string, v gjson.Result) error {
		switch key {
		case "rule_name":
			f.ruleName = v
		case "global_threshold":
			f.global = v
		case "rule_items":
			f.items = v
		case "rejected_code":
			f.code = v
		case "rejected_msg":
			f.msg = v
		case "redis":
			f.redis = v
		case "show_limit_quota_header":
			f.show = v
		case "failure_mode":
			f.failure = v
		case "xff_num_trusted_hops":
			f.hops = v
		case "rule_match_mode":
			f.matchMode = v
		case reservationField:
			f.reservation = v
		case "token_count_strategy":
			f.strategy = v
		case weightsField:
			f.weights = v
		case "window_type":
			f.windowType = v
		case "concurrency_lease_seconds":
			f.lease = v
		case "over_limit_action":
			f.overLimit = v
		case maxQueueWaitField:
			f.queueWait = v
		default:
			return errUnknownField
		}
		return nil
	}, func(key string) bool { return strings.HasPrefix(key, gatewayReservedPrefix) })
	if err != nil {
		return nil, err
	}

	c := &Config{
		RejectedCode:   DefaultRejectedCode,
		RejectedMsg:    DefaultRejectedMsg,
		FailureMode:    FailAllow,
		XFFTrustedHops: xffTrustedHopsUnset,
		Reservation: Reservation{BytesPerToken: DefaultBytesPerToken,
			DefaultCompletionTokens: DefaultCompletionTokens, MaxBodyBytes: DefaultMaxBodyBytes},
		Cost:           Cost{Weights: Weights{defaultWeight, defaultWeight, defaultWeight, defaultWeight}},
		LeaseSeconds:   DefaultLeaseSeconds,
		MaxQueueWaitMs: DefaultMaxQueueWaitMs,
	}
	if !isSet(f.ruleName) {
		return nil, fieldErr("rule_name", "required")
	}
	if c.RuleName, err = nonEmptyString("rule_name", f.ruleName); err != nil {
		return nil, err
	}

	switch hasGlobal, hasItems := isSet(f.global), isSet(f.items); {
	case hasGlobal && hasItems:
		return nil, fieldErr("", "global_threshold and rule_items cannot both be set")
	case !hasGlobal && !hasItems:
		return nil, fieldErr("", "one of global_threshold or rule_items is required")
	case hasGlobal:
		if c.Global, err = parseGlobal("global_threshold", f.global); err != nil {
			return nil, err
		}
	default:
		if c.Items, err = parseRuleItems("rule_items", f.items); err != nil {
			return nil, err
		}
	}

	if isSet(f.code) {
		n, err := intField("rejected_code", f.code, minRejectedCode, maxRejectedCode)
		if err != nil {
			return nil, err
		}
		c.RejectedCode = uint32(n)
	}
	if isSet(f.msg) {
		if c.RejectedMsg, err = stringField("rejected_msg", f.msg); err != nil {
			return nil, err
		}
	}
	if isSet(f.show) {
		if c.ShowLimitQuotaHeader, err = boolField("show_limit_quota_header", f.show); err != nil {
			return nil, err
		}
	}
	if isSet(f.failure) {
		mode, err := enumField("failure_mode", f.failure, "allow", "deny") // FailAllow, FailDeny
		if err != nil {
			return nil, err
		}
		c.FailureMode = FailureMode(mode)
	}
	if isSet(f.hops) {
		n, err := intField("xff_num_trusted_hops", f.hops, 0, maxXFFTrustedHops)
		if err != nil {
			return nil, err
		}
		c.XFFTrustedHops = int(n)
	}

	if err := c.parseCostOptions(f.matchMode, f.reservation, f.strategy, f.weights); err != nil {
		return nil, err
	}
	if isSet(f.windowType) {
		t, err := enumField("window_type", f.windowType, "fixed", "sliding") // Fixed, Sliding
		if err != nil {
			return nil, err
		}
		c.WindowType = WindowType(t)
	}
	if isSet(f.lease) {
		if c.LeaseSeconds, err = intField("concurrency_lease_seconds", f.lease, 1, maxLeaseSeconds); err != nil {
			return nil, err
		}
	}
	if err := c.parseOverLimit(f.overLimit, f.queueWait); err != nil {
		return nil, err
	}

	if !isSet(f.redis) {
		return nil, fieldErr("redis", "required")
	}
	if c.Redis, err = parseRedis("redis", f.redis); err != nil {
		return nil, err
	}
	return c, nil
}

// parseOverLimit parses over_limit_action and max_queue_wait_ms, which only
// a queue uses: setting it with reject is a mistake worth refusing.
func (c *Config) parseOverLimit(action, wait gjson.Result) error {
	if isSet(action) {
		a, err := enumField("over_limit_action", action, "reject", "queue") // Reject, Queue
		if err != nil {
			return err
		}
		c.OverLimit = OverLimitAction(a)
	}
	if !isSet(wait) {
		return nil
	}
	if c.OverLimit != Queue {
		return fieldErr(maxQueueWaitField, "applies only with over_limit_action: queue")
	}
	var err error
	c.MaxQueueWaitMs, err = intField(maxQueueWaitField, wait, 1, maxQueueWaitMs)
	return err
}

func parseRedis(path string, v gjson.Result) (Redis, error) {
	r := Redis{TimeoutMs: DefaultRedisTimeoutMs}
	if !v.IsObject() {
		return r, fieldErr(path, "must be an object, got ", describe(v))
	}
	var name, port, user, pass, timeout, db gjson.Result
	err := walkObject(path, v, redisFields, func(key string, fv gjson.Result) error {
		switch key {
		case "service_name":
			name = fv
		case "service_port":
			port = fv
		case "username":
			user = fv
		case "password":
			pass = fv
		case "timeout":
			timeout = fv
		case "database":
			db = fv
		default:
			return errUnknownField
		}
		return nil
	}, nil)
	if err != nil {
		return r, err
	}
	if !isSet(name) {
		return r, fieldErr(path+".service_name", "required")
	}
	if r.ServiceName, err = nonEmptyString(path+".service_name", name); err != nil {
		return r, err
	}
	if isSet(port) {
		n, err := intField(path+".service_port", port, 1, 65535)
		if err != nil {
			return r, err
		}
		r.ServicePort = int(n)
	} else if strings.HasSuffix(r.ServiceName, StaticServiceSuffix) {
		r.ServicePort = DefaultRedisStaticPort
	} else {
		r.ServicePort = DefaultRedisPort
	}
	if isSet(user) {
		if r.Username, err = stringField(path+".username", user); err != nil {
			return r, err
		}
	}
	if isSet(pass) {
		if r.Password, err = stringField(path+".password", pass); err != nil {
			return r, err
		}
	}
	if isSet(timeout) {
		if r.TimeoutMs, err = intField(path+".timeout", timeout, 1, maxRedisTimeoutMs); err != nil {
			return r, err
		}
	}
	if isSet(db) {
		n, err := intField(path+".database", db, 0, maxRedisDatabase)
		if err != nil {
			return r, err
		}
		r.Database = int(n)
	}
	return r, nil
}

func parseGlobal(path string, v gjson.Result) (*LimitKey, error) {
	if !v.IsObject() {
		return nil, fieldErr(path, "must be an object, got ", describe(v))
	}
	k := &LimitKey{Key: AnyKey, Kind: KeyAny}
	err := walkObject(path, v, limitFields(), func(key string, fv gjson.Result) error {
		return k.setLimit(path, key, fv)
	}, nil)
	if err != nil {
		return nil, err
	}
	return k, k.checkLimits(path)
}

func parseRuleItems(path string, v gjson.Result) ([]RuleItem, error) {
	if !v.IsArray() {
		return nil, fieldErr(path, "must be an array, got ", describe(v))
	}
	arr := v.Array()
	if len(arr) == 0 {
		return nil, fieldErr(path, "must not be empty")
	}
	items := make([]RuleItem, 0, len(arr))
	for i, iv := range arr {
		item, err := parseRuleItem(index(path, i), iv)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}

func parseRuleItem(path string, v gjson.Result) (RuleItem, error) {
	var item RuleItem
	if !v.IsObject() {
		return item, fieldErr(path, "must be an object, got ", describe(v))
	}
	var types []LimitType
	var typeVal, keys gjson.Result
	err := walkObject(path, v, ruleItemFields(), func(key string, fv gjson.Result) error {
		if t, ok := limitTypeByField(key); ok {
			types = append(types, t)
			typeVal = fv
			return nil
		}
		if key == "limit_keys" {
			keys = fv
			return nil
		}
		return errUnknownField
	}, nil)
	if err != nil {
		return item, err
	}
	switch len(types) {
	case 0:
		var names []string
		for t := ByHeader; int(t) < len(limitTypes); t++ {
			names = append(names, t.String())
		}
		return item, fieldErr(path, "one of ", strings.Join(names, ", "), " is required")
	case 1:
	default:
		slices.Sort(types)
		names := make([]string, len(types))
		for i, t := range types {
			names[i] = t.String()
		}
		return item, fieldErr(path, "only one limit_by_* field may be set, got ", strings.Join(names, ", "))
	}
	item.Type = types[0]
	if err := parseRuleName(&item, child(path, item.Type.String()), typeVal); err != nil {
		return item, err
	}

	kp := child(path, "limit_keys")
	if !isSet(keys) {
		return item, fieldErr(kp, "required")
	}
	if !keys.IsArray() {
		return item, fieldErr(kp, "must be an array, got ", describe(keys))
	}
	arr := keys.Array()
	if len(arr) == 0 {
		return item, fieldErr(kp, "must not be empty")
	}
	item.Keys = make([]LimitKey, 0, len(arr))
	for i, kv := range arr {
		k, err := parseLimitKey(index(kp, i), item.Type, kv)
		if err != nil {
			return item, err
		}
		item.Keys = append(item.Keys, k)
	}
	return item, nil
}

// parseRuleName validates the limit_by_* value and sets item.Name and Raw.
func parseRuleName(item *RuleItem, path string, v gjson.Result) error {
	switch item.Type {
	case ByConsumer, ByPerConsumer:
		// Higress only checks that the key is present; its value ('') is ignored.
		if v.Type != gjson.String && v.Type != gjson.Null {
			return fieldErr(path, "must be a string (its value is ignored), got ", describe(v))
		}
		item.Name, item.Raw = ConsumerHeader, ConsumerHeader
		return nil
	}
	s, err := nonEmptyString(path, v)
	if err != nil {
		return err
	}
	item.Raw = s
	switch item.Type {
	case ByHeader, ByPerHeader:
		if !validHeaderName(s) {
			return fieldErr(path, "invalid header name ", quote(s))
		}
		item.Name = strings.ToLower(s)
	case ByParam, ByPerParam:
		item.Name = s
	case ByCookie, ByPerCookie:
		if !validCookieName(s) {
			return fieldErr(path, "invalid cookie name ", quote(s))
		}
		item.Name = s
	case ByPerIP:
		switch {
		case s == perIPRemoteAddr:
			item.Name = ""
		case strings.HasPrefix(s, perIPHeaderPrefix):
			h := s[len(perIPHeaderPrefix):]
			if !validHeaderName(h) {
				return fieldErr(path, "invalid header name ", quote(h), " in ", quote(s))
			}
			item.Name = strings.ToLower(h)
		default:
			return fieldErr(path, `must be "`+perIPRemoteAddr+`" or "`+perIPHeaderPrefix+`<name>", got `, quote(s))
		}
	}
	return nil
}

func parseLimitKey(path string, t LimitType, v gjson.Result) (LimitKey, error) {
	var k LimitKey
	if !v.IsObject() {
		return k, fieldErr(path, "must be an object, got ", describe(v))
	}
	var keyVal gjson.Result
	err := walkObject(path, v, limitKeyFields(), func(key string, fv gjson.Result) (err error) {
		if key == "key" {
			keyVal = fv
			return nil
		}
		return k.setLimit(path, key, fv)
	}, nil)
	if err != nil {
		return k, err
	}

	kp := child(path, "key")
	if !isSet(keyVal) {
		return k, fieldErr(kp, "required")
	}
	key := keyVal.Str
	switch keyVal.Type {
	case gjson.String:
	case gjson.Number:
		// An unquoted numeric key (YAML `key: 12345`): Higress takes its text.
		key = keyVal.Raw
	default:
		return k, fieldErr(kp, "must be a string, got ", describe(keyVal))
	}
	if err := parseKey(&k, kp, t, key); err != nil {
		return k, err
	}
	return k, k.checkLimits(path)
}

func parseKey(k *LimitKey, path string, t LimitType, s string) error {
	k.Key = s
	switch {
	case s == "":
		return fieldErr(path, "must not be empty")
	case s == AnyKey:
		k.Kind = KeyAny
	case strings.HasPrefix(s, RegexpKeyPrefix):
		re, err := regexp.Compile(s[len(RegexpKeyPrefix):])
		if err != nil {
			return fieldErr(path, "invalid regexp ", quote(s[len(RegexpKeyPrefix):]), ": ", err.Error())
		}
		k.Kind, k.Regexp = KeyRegexp, re
	case t == ByPerIP:
		p, ok := parseIPKey(s)
		if !ok {
			return fieldErr(path, "invalid IP or CIDR ", quote(s))
		}
		k.Kind, k.Prefix = KeyIPNet, p
	case t.PerValue():
		return fieldErr(path, t.String(), ` needs a "`+RegexpKeyPrefix+`<re>" or "`+AnyKey+`" key, got `, quote(s))
	default:
		k.Kind = KeyExact
	}
	return nil
}

// parseIPKey parses a limit_by_per_ip key: an IPv4 or IPv6 address or CIDR.
func parseIPKey(s string) (netip.Prefix, bool) {
	var p netip.Prefix
	if strings.IndexByte(s, '/') >= 0 {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, false
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return p, false
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	p = p.Masked()
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p, p.IsValid()
}

// setLimit parses the limit field key (a window or max_concurrent_requests)
// of the limit key at path, returning errUnknownField when key is not one.
func (k *LimitKey) setLimit(path, key string, v gjson.Result) error {
	wk, isWindow := windowKindByField(key)
	if !isWindow && key != maxConcurrentField {
		return errUnknownField
	}
	if !isSet(v) {
		return nil
	}
	n, err := intField(child(path, key), v, 1, math.MaxInt64)
	if err != nil {
		return err
	}
	if isWindow {
		k.Windows = append(k.Windows, Window{Field: wk.field, Unit: wk.unit, Seconds: wk.seconds, Limit: n})
	} else {
		k.MaxConcurrent = n
	}
	return nil
}

// checkLimits requires at least one limit, and sorts the windows.
func (k *LimitKey) checkLimits(path string) error {
	if len(k.Windows) == 0 && k.MaxConcurrent == 0 {
		return fieldErr(path, "at least one of ", windowFieldList(), " or ", maxConcurrentField, " is required")
	}
	sortWindows(k.Windows)
	return nil
}

func sortWindows(ws []Window) {
	slices.SortFunc(ws, func(a, b Window) int {
		if a.Seconds != b.Seconds {
			if a.Seconds < b.Seconds {
				return -1
			}
			return 1
		}
		return int(a.Unit) - int(b.Unit)
	})
}

// errUnknownField is returned by walkObject's set callback for a key it does
// not know.
var errUnknownField = errors.New("unknown field")

// walkObject calls set for each member of obj, in order, stopping at the
// first error. It refuses duplicate keys, and turns errUnknownField into a
// *FieldError naming the key. Keys for which skip returns true are ignored.
func walkObject(path string, obj gjson.Result, known []string, set func(string, gjson.Result) error, skip func(string) bool) error {
	var err error
	seen := make(map[string]struct{})
	obj.ForEach(func(k, v gjson.Result) bool {
		key := k.String()
		if skip != nil && skip(key) {
			return true
		}
		p := child(path, key)
		if _, dup := seen[key]; dup {
			err = fieldErr(p, "duplicate field")
			return false
		}
		seen[key] = struct{}{}
		err = set(key, v)
		if err == errUnknownField {
			msg := "unknown field"
			if s := suggest(key, known); s != "" {
				msg += " (did you mean " + s + "?)"
			}
			err = fieldErr(p, msg)
		}
		return err == nil
	})
	return err
}

// isSet reports whether v is present and not null.
func isSet(v gjson.Result) bool { return v.Type != gjson.Null }

// enumField parses a string field that must be one of names, returning the
// index of the one it is.
func enumField(path string, v gjson.Result, names ...string) (int, error) {
	s, err := stringField(path, v)
	if err != nil {
		return 0, err
	}
	if i := slices.Index(names, s); i >= 0 {
		return i, nil
	}
	var want strings.Builder
	for i, name := range names {
		switch {
		case i == len(names)-1 && i > 0:
			want.WriteString(" or ")
		case i > 0:
			want.WriteString(", ")
		}
		want.WriteString(quote(name))
	}
	return 0, fieldErr(path, "must be ", want.String(), ", got ", quote(s))
}

func stringField(path string, v gjson.Result) (string, error) {
	if v.Type != gjson.String {
		return "", fieldErr(path, "must be a string, got ", describe(v))
	}
	return v.Str, nil
}

func nonEmptyString(path string, v gjson.Result) (string, error) {
	s, err := stringField(path, v)
	if err == nil && s == "" {
		err = fieldErr(path, "must not be empty")
	}
	return s, err
}

func boolField(path string, v gjson.Result) (bool, error) {
	switch v.Type {
	case gjson.True:
		return true, nil
	case gjson.False:
		return false, nil
	}
	return false, fieldErr(path, "must be a boolean, got ", describe(v))
}

// intField reads an integer in [min, max]. Integral numbers written as
// floats (100.0, 1e3) are accepted; strings are not.
func intField(path string, v gjson.Result, min, max int64) (int64, error) {
	n, ok := intValue(v)
	if ok && n >= min && n <= max {
		return n, nil
	}
	want := "an integer between " + strconv.FormatInt(min, 10) + " and " + strconv.FormatInt(max, 10)
	if max == math.MaxInt64 {
		switch min {
		case 1:
			want = "a positive integer"
		case 0:
			want = "a non-negative integer"
		default:
			want = "an integer no less than " + strconv.FormatInt(min, 10)
		}
	}
	return 0, fieldErr(path, "must be ", want, ", got ", describe(v))
}

func intValue(v gjson.Result) (int64, bool) {
	if v.Type != gjson.Number {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.Raw, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(v.Raw, 64)
	// 2^63 is exactly representable; anything >= it does not fit.
	if err != nil || f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// describe renders a JSON value for an error message.
func describe(v gjson.Result) string {
	switch v.Type {
	case gjson.String:
		return "string " + quote(v.Str)
	case gjson.Number:
		return "number " + truncate(v.Raw)
	case gjson.True:
		return "true"
	case gjson.False:
		return "false"
	case gjson.JSON:
		if v.IsArray() {
			return "array"
		}
		return "object"
	}
	if v.Raw == "" {
		return "nothing"
	}
	return "null"
}

func truncate(s string) string {
	if len(s) <= maxQuotedValueInMessage {
		return s
	}
	cut := maxQuotedValueInMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// quote quotes s Go-style, truncating long values.
func quote(s string) string {
	if t := truncate(s); len(t) != len(s) {
		return strconv.Quote(t[:len(t)-3]) + "..."
	}
	return strconv.Quote(s)
}

// child returns the path of member key of the object at path.
func child(path, key string) string {
	if !plainKey(key) {
		key = quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func plainKey(s string) bool {
	if s == "" || len(s) > maxQuotedValueInMessage {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token),
// optionally preceded by ':' for HTTP/2 pseudo-headers such as ":authority".
func validHeaderName(s string) bool {
	if strings.HasPrefix(s, ":") {
		s = s[1:]
	}
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func isTokenChar(c byte) bool {
	if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validCookieName refuses names that can never be found in a Cookie header:
// with ';', '=', control characters, or leading/trailing spaces.
func validCookieName(s string) bool {
	if s == "" || trimSpace(s) != s {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ';' || c == '=' || c < 0x20 || c == 0x7f {
			return false
		}
	}
	return true
}

// suggest returns the known field closest to key, if close enough.
func suggest(key string, known []string) string {
	if len(key) > 64 {
		return ""
	}
	best, bestD := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), k); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
