package config

// The whole plugin configuration as the gateway hands it to the plugin: the
// global configuration and, under _rules_, configurations matched by route,
// domain, service or route prefix. Parse reads one configuration; here is
// which parts of the document the wrapper (higress-group/wasm-go's
// plugin_wrapper.go OnPluginStart and matcher.RuleMatcher.ParseRuleConfig,
// v1.1.1) hands to Parse, so that the plugin, atrl check and the local
// gateway can refuse a document with one message before the wrapper buries
// it under its own wording ("parse rule config failed: parse config failed,
// no valid rules; global config parse error: ...").

import (
	"errors"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Keys of the document that the wrapper reads and Parse ignores (they start
// with gatewayReservedPrefix).
const (
	PluginIDKey         = "_plugin_id_" // the plugin's id, for the wrapper's log lines
	RulesKey            = "_rules_"
	MatchRouteKey       = "_match_route_"
	MatchDomainKey      = "_match_domain_"
	MatchServiceKey     = "_match_service_"
	MatchRoutePrefixKey = "_match_route_prefix_"
)

// Document is a parsed plugin configuration document.
type Document struct {
	// Global is the global configuration: what applies to the requests no
	// rule matches. nil when the document has only _rules_.
	Global *Config
	// Rules are the entries of _rules_, in document order.
	Rules []DocumentRule
}

// DocumentRule is one entry of _rules_: the configuration of the requests
// it matches (parsed alone: it does not inherit the global one).
type DocumentRule struct {
	Routes, Domains, Services, RoutePrefixes []string
	Config                                   *Config
}

// ParseDocument parses a plugin configuration document (JSON) as the
// wrapper does, and refuses it whenever the wrapper would refuse it, with
// one error: a *FieldError whose path starts with _rules_[i] for a rule's
// mistake, and is Parse's own for the global configuration.
//
// It also refuses a global configuration that Parse refuses next to valid
// _rules_, which the wrapper drops without a word (the requests no rule
// matches would go unlimited), when the global part has a field of the
// plugin's own; keys the gateway adds (_plugin_id_...) alone are no
// global configuration.
func ParseDocument(doc []byte) (*Document, error) {
	if len(doc) > 0 && !gjson.ValidBytes(doc) {
		return nil, invalidJSON(doc)
	}
	// The wrapper takes the id out before the rest is read, so that a
	// document of the id alone is an empty one.
	if id := gjson.GetBytes(doc, PluginIDKey); id.String() != "" {
		var err error
		if doc, err = sjson.DeleteBytes(doc, PluginIDKey); err != nil {
			return nil, fieldErr(PluginIDKey, "cannot be removed from the document: ", err.Error())
		}
	}
	root := gjson.ParseBytes(doc)
	members := root.Map() // empty when the document is empty or not an object
	d := &Document{}
	if len(members) == 0 {
		// The wrapper parses an empty document (no bytes, {}, the id
		// alone) as the global configuration; Parse refuses it.
		c, err := Parse(root)
		if err != nil {
			return nil, err
		}
		d.Global = c
		return d, nil
	}
	rules, hasRules := members[RulesKey]
	delete(members, RulesKey)
	if len(members) > 0 {
		c, err := Parse(root) // the whole document: Parse ignores _rules_
		switch {
		case err == nil:
			d.Global = c
		case !hasRules || len(rules.Array()) == 0 || hasOwnField(members):
			return nil, err
		}
	}
	list := rules.Array()
	if len(list) == 0 {
		if d.Global == nil {
			return nil, fieldErr(RulesKey, "lists no rule, and there is no global configuration either:"+
				" set rule_name, redis and global_threshold or rule_items at the top level, or add a rule")
		}
		return d, nil
	}
	d.Rules = make([]DocumentRule, 0, len(list))
	for i, r := range list {
		rule, err := parseDocumentRule(index(RulesKey, i), r)
		if err != nil {
			return nil, err
		}
		d.Rules = append(d.Rules, rule)
	}
	return d, nil
}

// parseDocumentRule reads one entry of _rules_, at path: what it matches,
// as the wrapper's matcher reads it, then its configuration.
func parseDocumentRule(path string, r gjson.Result) (DocumentRule, error) {
	rule := DocumentRule{
		Routes:        matchNames(r.Get(MatchRouteKey), false),
		Domains:       matchNames(r.Get(MatchDomainKey), true),
		Services:      matchNames(r.Get(MatchServiceKey), false),
		RoutePrefixes: matchNames(r.Get(MatchRoutePrefixKey), false),
	}
	if len(rule.Routes)+len(rule.Domains)+len(rule.Services)+len(rule.RoutePrefixes) == 0 {
		return rule, fieldErr(path, "matches nothing: a rule needs ", MatchRouteKey, ", ", MatchDomainKey, ", ",
			MatchServiceKey, " or ", MatchRoutePrefixKey, ", a list of names")
	}
	c, err := Parse(r)
	if err != nil {
		var fe *FieldError
		if !errors.As(err, &fe) {
			return rule, fieldErr(path, err.Error())
		}
		if fe.Path != "" { // a rule is an object: its paths start with a key
			path += "." + fe.Path
		}
		return rule, fieldErr(path, fe.Msg)
	}
	rule.Config = c
	return rule, nil
}

// matchNames reads a _match_*_ list as the wrapper's matcher does: a value
// that is not a list is a list of one, and empty names are dropped, except
// domains, which it keeps even empty.
func matchNames(v gjson.Result, keepEmpty bool) []string {
	var names []string
	for _, n := range v.Array() {
		if s := n.String(); s != "" || keepEmpty {
			names = append(names, s)
		}
	}
	return names
}

// hasOwnField reports whether members (the top-level ones, _rules_ left
// out) hold a field of the plugin's, not only keys the gateway adds.
func hasOwnField(members map[string]gjson.Result) bool {
	for k := range members {
		if !isGatewayKey(k) {
			return true
		}
	}
	return false
}

// Refusal is the one line that says why a document is refused, as the
// plugin logs it when it starts and atrl check prints it: the same words
// wherever a user meets the mistake.
func Refusal(err error) string { return "configuration refused: " + err.Error() }

// ResolvePasswords checks that every configuration of the document can
// read its Redis password where it runs (getenv: its environment): a
// redis.password_env naming a variable unset there refuses the document,
// with the place of its configuration (_rules_[i] for a rule).
func (d *Document) ResolvePasswords(getenv func(string) string) error {
	if d.Global != nil {
		if _, err := d.Global.Redis.ResolvePassword(getenv); err != nil {
			return err
		}
	}
	for i, r := range d.Rules {
		if _, err := r.Config.Redis.ResolvePassword(getenv); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				return fieldErr(index(RulesKey, i)+"."+fe.Path, fe.Msg)
			}
			return err
		}
	}
	return nil
}
