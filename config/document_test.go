package config

import (
	"strings"
	"testing"

	"github.com/higress-group/wasm-go/pkg/matcher"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
)

// Configurations for the documents below: one the parser takes, one whose
// limit it refuses.
const (
	docGood = `"rule_name": "chat", "global_threshold": {"token_per_minute": 10}, "redis": {"service_name": "redis.static"}`
	docBad  = `"rule_name": "chat", "global_threshold": {"token_per_minute": 0}, "redis": {"service_name": "redis.static"}`
	// docBadMsg is what Parse says of docBad.
	docBadMsg = "global_threshold.token_per_minute: must be a positive integer, got number 0"
)

func TestParseDocumentGlobal(t *testing.T) {
	d, err := ParseDocument([]byte(`{` + docGood + `}`))
	require.NoError(t, err)
	require.NotNil(t, d.Global)
	assert.Equal(t, "chat", d.Global.RuleName)
	assert.Empty(t, d.Rules)

	_, err = ParseDocument([]byte(`{` + docBad + `}`))
	require.EqualError(t, err, docBadMsg, "Parse's message, alone")
	var fe *FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "global_threshold.token_per_minute", fe.Path)
}

func TestParseDocumentRules(t *testing.T) {
	d, err := ParseDocument([]byte(`{"_rules_": [
		{"_match_route_": ["a", ""], ` + docGood + `},
		{"_match_domain_": ["*.example.com"], "_match_service_": "llm.svc", ` + strings.Replace(docGood, `"chat"`, `"second"`, 1) + `}]}`))
	require.NoError(t, err)
	assert.Nil(t, d.Global, "no global configuration: only _rules_")
	require.Len(t, d.Rules, 2)
	assert.Equal(t, []string{"a"}, d.Rules[0].Routes, "empty names are dropped, as the wrapper does")
	assert.Equal(t, "chat", d.Rules[0].Config.RuleName)
	assert.Equal(t, []string{"*.example.com"}, d.Rules[1].Domains)
	assert.Equal(t, []string{"llm.svc"}, d.Rules[1].Services, "a name that is not in a list is a list of one")
	assert.Equal(t, "second", d.Rules[1].Config.RuleName)

	d, err = ParseDocument([]byte(`{` + docGood + `, "_rules_": [{"_match_route_prefix_": ["llm-"], ` + docGood + `}]}`))
	require.NoError(t, err)
	require.NotNil(t, d.Global, "global and rules")
	assert.Equal(t, []string{"llm-"}, d.Rules[0].RoutePrefixes)
}

// A rule's mistake is named where it is in the document.
func TestParseDocumentNamesTheRule(t *testing.T) {
	for doc, want := range map[string]string{
		`{"_rules_": [{"_match_route_": ["a"], ` + docGood + `}, {"_match_route_": ["b"], ` + docBad + `}]}`: "_rules_[1]." + docBadMsg,
		`{` + docGood + `, "_rules_": [{"_match_route_": ["a"], ` + docBad + `}]}`:                           "_rules_[0]." + docBadMsg,
		`{"_rules_": [{"_match_route_": ["a"], "global_threshold": {"token_per_minute": 1}}]}`:               "_rules_[0].rule_name: required",
		`{"_rules_": [{"_match_route_": ["a"], "rule_name": "r", "redis": {"service_name": "r.static"}}]}`:   "_rules_[0]: one of global_threshold or rule_items is required",
		`{"_rules_": [{"_match_route_": ["a"], "rule_nme": "r"}]}`:                                           "_rules_[0].rule_nme: unknown field (did you mean rule_name?)",
		`{"_rules_": [{` + docGood + `}]}`:                                                                   "_rules_[0]: matches nothing: a rule needs _match_route_, _match_domain_, _match_service_ or _match_route_prefix_, a list of names",
		`{"_rules_": [{"_match_route_": [""], ` + docGood + `}]}`:                                            "_rules_[0]: matches nothing: a rule needs _match_route_, _match_domain_, _match_service_ or _match_route_prefix_, a list of names",
		`{"_rules_": []}`: "_rules_: lists no rule, and there is no global configuration either: set rule_name, redis and global_threshold or rule_items at the top level, or add a rule",
	} {
		_, err := ParseDocument([]byte(doc))
		assert.EqualError(t, err, want, doc)
	}
}

// The wrapper drops a global configuration Parse refuses when the rules
// parse; ParseDocument refuses it, unless the gateway's keys are all there
// is of it.
func TestParseDocumentRefusesADroppedGlobal(t *testing.T) {
	_, err := ParseDocument([]byte(`{` + docBad + `, "_rules_": [{"_match_route_": ["a"], ` + docGood + `}]}`))
	assert.EqualError(t, err, docBadMsg)

	d, err := ParseDocument([]byte(`{"_plugin_id_": "", "_rules_": [{"_match_route_": ["a"], ` + docGood + `}]}`))
	require.NoError(t, err)
	assert.Nil(t, d.Global)
	assert.Len(t, d.Rules, 1)
}

func TestParseDocumentEmptyAndInvalid(t *testing.T) {
	_, err := ParseDocument(nil)
	_, parseErr := Parse(gjson.Result{})
	require.Error(t, parseErr)
	assert.EqualError(t, err, parseErr.Error(), "empty: parsed as the wrapper does")
	assert.EqualError(t, err, "configuration must be a JSON object, got nothing")

	_, err = ParseDocument([]byte(`{}`))
	assert.EqualError(t, err, "rule_name: required")
	_, err = ParseDocument([]byte(`{"_plugin_id_": "p-1"}`))
	assert.EqualError(t, err, "rule_name: required", "the id alone is an empty document")
	_, err = ParseDocument([]byte(`{"_plugin_id_": "p-1", ` + docGood + `}`))
	assert.NoError(t, err)

	_, err = ParseDocument([]byte(`{"rule_name": "x",`))
	assert.EqualError(t, err, "invalid JSON at line 1, column 19: the document ends before its last value does")
	_, err = ParseDocument([]byte(`[1]`))
	assert.EqualError(t, err, "configuration must be a JSON object, got array")
}

// pluginContext is the least of a plugin context the wrapper's matcher
// asks for: rule-level isolation is off, as in the plugin.
type pluginContext struct{}

func (pluginContext) SetContext(string, interface{})  {}
func (pluginContext) GetContext(string) interface{}   { return nil }
func (pluginContext) EnableRuleLevelConfigIsolation() {}
func (pluginContext) IsRuleLevelConfigIsolation() bool {
	return false
}
func (pluginContext) GetFingerPrint() string { return "" }
func (pluginContext) DoLeaderElection()      {}
func (pluginContext) IsLeader() bool         { return false }

// wrapperAccepts is what the wrapper decides of a document, with Parse as
// the plugin's parse function: its OnPluginStart's steps before the
// matcher, then the matcher itself.
func wrapperAccepts(doc []byte) bool {
	var root gjson.Result
	if len(doc) > 0 {
		if !gjson.ValidBytes(doc) {
			return false
		}
		if gjson.GetBytes(doc, PluginIDKey).String() != "" {
			doc, _ = sjson.DeleteBytes(doc, PluginIDKey)
		}
		root = gjson.ParseBytes(doc)
	}
	var m matcher.RuleMatcher[*Config]
	err := m.ParseRuleConfig(pluginContext{}, root, func(js gjson.Result, c **Config) (err error) {
		*c, err = Parse(gjson.ParseBytes([]byte(js.Raw)))
		return err
	}, nil)
	return err == nil
}

// ParseDocument refuses what the wrapper refuses, and takes what it takes
// but for a dropped global configuration.
func TestParseDocumentAgreesWithTheWrapper(t *testing.T) {
	rule := func(match, body string) string { return `{` + match + `, ` + body + `}` }
	for _, doc := range []string{
		``, `{}`, `null`, `[1]`, `"x"`, ` `, `{"_plugin_id_": "p"}`, `{"_plugin_id_": ""}`, `{"_foo_": 1}`,
		`{` + docGood + `}`, `{` + docBad + `}`, `{"_plugin_id_": "p", ` + docGood + `}`,
		`{"_rules_": []}`, `{"_rules_": null}`, `{"_rules_": {}}`, `{"_rules_": "x"}`, `{"_rules_": [1]}`,
		`{` + docGood + `, "_rules_": []}`, `{` + docBad + `, "_rules_": []}`,
		`{"_rules_": [` + rule(`"_match_route_": ["a"]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_route_": ["a"]`, docBad) + `]}`,
		`{"_rules_": [` + rule(`"_match_route_": "a"`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_route_": [""]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_domain_": [""]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_service_": ["s"], "_match_route_": ["r"]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_route_prefix_": ["p"]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_consumer_": ["c"]`, docGood) + `]}`,
		`{"_rules_": [` + rule(`"_match_route_": ["a"]`, docGood) + `, ` + rule(`"_match_route_": ["b"]`, docBad) + `]}`,
		`{"_plugin_id_": "", "_rules_": [` + rule(`"_match_route_": ["a"]`, docGood) + `]}`,
		`{"_foo_": 1, "_rules_": [` + rule(`"_match_route_": ["a"]`, docGood) + `]}`,
		`{` + docGood + `, "_rules_": [` + rule(`"_match_route_": ["a"]`, docBad) + `]}`,
	} {
		_, err := ParseDocument([]byte(doc))
		assert.Equal(t, wrapperAccepts([]byte(doc)), err == nil, "%s: %v", doc, err)
	}
	// The one difference: a global configuration of the plugin's own
	// fields that the wrapper drops.
	dropped := `{` + docBad + `, "_rules_": [` + rule(`"_match_route_": ["a"]`, docGood) + `]}`
	require.True(t, wrapperAccepts([]byte(dropped)))
	_, err := ParseDocument([]byte(dropped))
	assert.EqualError(t, err, docBadMsg)
}
