package config

// Rule items and limit keys: the values whose meaning depends on the rule
// item's type, which the tables in parse.go cannot check alone.

import (
	"net/netip"
	"regexp"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// parseRuleItem reads an entry of rule_items.
func parseRuleItem(path string, v gjson.Result) (RuleItem, error) {
	var item RuleItem
	members, err := readMembers(path, v, ruleItemFields(), nil)
	if err != nil {
		return item, err
	}
	if item.Type, err = limitTypeOf(path, members); err != nil {
		return item, err
	}
	name := item.Type.String()
	if err := parseRuleName(&item, child(path, name), members[name]); err != nil {
		return item, err
	}

	kp := child(path, limitKeysField)
	keys := members[limitKeysField]
	if !isSet(keys) {
		return item, fieldErr(kp, "required")
	}
	item.Keys, err = readNonEmptyArray(kp, keys, func(path string, v gjson.Result) (LimitKey, error) {
		k, err := parseLimitKey(path, item.Type, v)
		if k.Kind == KeyExact {
			// Matched against the request's value as normalised (normalize.go):
			// "bearer  sk-1" is the key "Bearer sk-1".
			k.Key = item.normalize(k.Key)
		}
		return k, err
	})
	return item, err
}

// limitTypeOf returns the type of the rule item at path, whose members are
// given: exactly one limit_by_* member must be present. Its presence is what
// counts, even with a null value, as in Higress (limit_by_consumer's value is
// ignored).
func limitTypeOf(path string, members map[string]gjson.Result) (LimitType, error) {
	var found []string
	var last LimitType
	for t := ByHeader; int(t) < len(limitTypes); t++ {
		if _, ok := members[t.String()]; ok {
			found = append(found, t.String())
			last = t
		}
	}
	switch len(found) {
	case 1:
		return last, nil
	case 0:
		return 0, fieldErr(path, "one of ", strings.Join(limitTypeNames(), ", "), " is required")
	}
	return 0, fieldErr(path, "only one limit_by_* field may be set, got ", strings.Join(found, ", "))
}

// parseRuleName validates the limit_by_* value and sets item.Name and Raw.
func parseRuleName(item *RuleItem, path string, v gjson.Result) error {
	switch item.Type {
	case ByConsumer, ByPerConsumer, ByModel, ByPerModel, ByAPIKey, ByPerAPIKey:
		// Higress only checks that the key is present; its value ('') is
		// ignored. So is a model type's: the model is read as model_source
		// says, for every item; and an API key type's: the key is read
		// wherever clients send it (APIKeys).
		if v.Type != gjson.String && v.Type != gjson.Null {
			return fieldErr(path, "must be a string (its value is ignored), got ", describe(v))
		}
		if item.Type == ByConsumer || item.Type == ByPerConsumer {
			item.Name, item.Raw = ConsumerHeader, ConsumerHeader
		}
		return nil
	}
	s, err := readNonEmptyString(path, v)
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

// parseLimitKey reads an entry of the limit_keys of a rule item of type t.
func parseLimitKey(path string, t LimitType, v gjson.Result) (LimitKey, error) {
	var k LimitKey
	fs := limitKeyFields
	if t.ModelValued() {
		fs = modelKeyFields[t]
	}
	if err := fs.read(&k, path, v); err != nil {
		return k, err
	}
	if err := k.parseKey(child(path, keyField), t); err != nil {
		return k, err
	}
	return k, k.checkLimits(path)
}

// parseKey sets k's Kind, and its Regexp or Prefix, from its Key as read
// for a rule item of type t (ByModel for the model pattern of a per_model
// entry); path is the key's.
func (k *LimitKey) parseKey(path string, t LimitType) error {
	s := k.Key
	switch {
	case s == "":
		return fieldErr(path, "must not be empty")
	case s == AnyKey:
		k.Kind = KeyAny
	case strings.HasPrefix(s, RegexpKeyPrefix):
		re, err := compileKeyRegexp(path, s)
		if err != nil {
			return err
		}
		k.Kind, k.Regexp = KeyRegexp, re
		k.literal, k.form = literalOf(re.String())
	case t == ByPerIP:
		p, ok := parseIPKey(s)
		if !ok {
			return fieldErr(path, "invalid IP or CIDR ", quote(s))
		}
		k.Kind, k.Prefix = KeyIPNet, p
	case t.ModelValued() && strings.Contains(s[:len(s)-1], AnyKey):
		return errMidStar(path, s)
	case t.ModelValued() && strings.HasSuffix(s, AnyKey):
		k.Kind = KeyPrefix
	case t == ByPerModel:
		return fieldErr(path, t.String(), ` needs a "`+RegexpKeyPrefix+`<re>", "<prefix>`+AnyKey+`" or "`+AnyKey+`" key, got `, quote(s))
	case t.PerValue():
		return fieldErr(path, t.String(), ` needs a "`+RegexpKeyPrefix+`<re>" or "`+AnyKey+`" key, got `, quote(s))
	default:
		k.Kind = KeyExact
	}
	return nil
}

// errMidStar refuses the model pattern s, at path, whose '*' is not at its
// end: a model name never holds one, and a prefix ends with it.
func errMidStar(path, s string) error {
	return fieldErr(path, `'*' may only end a model name, as a prefix ("claude-opus-4*"), got `, quote(s))
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

// parseKey sets r's Kind, and its Name or Regexp, from its Key, a
// non-empty key of token_weights.models at path: "regexp:<re>",
// "<prefix>*" or an exact model name.
func (r *ModelRule) parseKey(path string) error {
	s := r.Key
	switch {
	case strings.HasPrefix(s, RegexpKeyPrefix):
		re, err := compileKeyRegexp(path, s)
		if err != nil {
			return err
		}
		r.Kind, r.Regexp = ModelRegexp, re
	case s == AnyKey:
		return fieldErr(path, "a prefix must not be empty (token_weights' own weights apply to every model no key matches)")
	case strings.Contains(s[:len(s)-1], AnyKey):
		return errMidStar(path, s)
	case strings.HasSuffix(s, AnyKey):
		r.Kind, r.Name = ModelPrefix, s[:len(s)-1]
	default:
		r.Kind, r.Name = ModelExact, s
	}
	return nil
}

// indexModels builds what weightsFor looks models up in from ModelWeights,
// and the largest weight of each kind, for UnknownModel.
func (c *Cost) indexModels() {
	c.models = modelIndex[Weights]{}
	c.strictest = c.Weights
	for i := range c.ModelWeights {
		r := &c.ModelWeights[i]
		c.models.add(r.Kind, r.Name, r.Regexp, r.Weights)
		w := r.Weights
		c.strictest = Weights{
			Input:         max(c.strictest.Input, w.Input),
			Output:        max(c.strictest.Output, w.Output),
			CacheRead:     max(c.strictest.CacheRead, w.CacheRead),
			CacheCreation: max(c.strictest.CacheCreation, w.CacheCreation),
		}
	}
	c.models.build()
}

// checkLimits requires at least one limit, and sorts the windows.
func (k *LimitKey) checkLimits(path string) error {
	if len(k.Windows) == 0 && k.MaxConcurrent == 0 {
		names := limitFields()
		last := len(names) - 1
		return fieldErr(path, "at least one of ", strings.Join(names[:last], ", "), " or ", names[last], " is required")
	}
	sortWindows(k.Windows)
	return nil
}

// sortWindows sorts windows by length, then token windows first.
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

// isTokenChar reports whether c may appear in an RFC 9110 token.
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

// compileKeyRegexp compiles a "regexp:<re>" key, naming the field and the
// regexp when it is invalid.
func compileKeyRegexp(path, key string) (*regexp.Regexp, error) {
	re, err := regexp.Compile(key[len(RegexpKeyPrefix):])
	if err != nil {
		return nil, fieldErr(path, "invalid regexp ", quote(key[len(RegexpKeyPrefix):]), ": ", err.Error())
	}
	return re, nil
}
