package config

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"
)

// Limits by model (issue 15): model_source, limit_by_model,
// limit_by_per_model and per_model. Which source a request's model comes
// from is the plugin's business: here requests carry it (withModel).

// budgetsYAML is the configuration of issue 15, as users write it.
const budgetsYAML = `
rule_name: llm
rule_match_mode: all
model_source: [header:X-Higress-LLM-Model, body, path]
rule_items:
  - limit_by_per_consumer: ''
    limit_keys:
      - key: "*"
        token_per_day: 1000000        # each consumer, all models together
        per_model:                    # and, within each consumer, each model: first entry that matches
          - model: "regexp:^gpt-4o$"
            token_per_minute: 10000
          - model: "claude-opus-4*"
            token_per_day: 50000
          - model: "*"
            token_per_minute: 50000
  - limit_by_per_model: ''            # each model, all consumers together
    limit_keys:
      - key: "regexp:^gpt-4o$"
        token_per_minute: 300000
      - key: "*"
        token_per_minute: 1000000
redis:
  service_name: redis.static
`

// fromYAML turns a YAML configuration into the JSON the gateway hands over.
func fromYAML(t testing.TB, y string) string {
	t.Helper()
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(y), &doc))
	js, err := json.Marshal(doc)
	require.NoError(t, err)
	return string(js)
}

func TestParseModelLimits(t *testing.T) {
	c := mustParse(t, fromYAML(t, budgetsYAML))
	require.Equal(t, []ModelSource{{Kind: ModelFromHeader, Header: "x-higress-llm-model"}, {Kind: ModelFromBody}, {Kind: ModelFromPath}}, c.ModelSources)
	require.True(t, c.HasModelLimits())

	parent := c.Items[0].Keys[0]
	require.Equal(t, []Window{win("token_per_day", 86400, 1000000)}, parent.Windows)
	pm := parent.PerModel
	require.Len(t, pm, 3)
	require.Equal(t, "regexp:^gpt-4o$", pm[0].Key)
	require.Equal(t, KeyRegexp, pm[0].Kind)
	require.Equal(t, "^gpt-4o$", pm[0].Regexp.String())
	require.Equal(t, []Window{win("token_per_minute", 60, 10000)}, pm[0].Windows)
	require.Equal(t, LimitKey{Key: "claude-opus-4*", Kind: KeyPrefix, Windows: []Window{win("token_per_day", 86400, 50000)}}, pm[1])
	require.Equal(t, LimitKey{Key: "*", Kind: KeyAny, Windows: []Window{win("token_per_minute", 60, 50000)}}, pm[2])
	for _, e := range pm {
		require.Nil(t, e.PerModel)
	}

	it := c.Items[1]
	require.Equal(t, ByPerModel, it.Type)
	require.True(t, it.Type.PerValue())
	require.Equal(t, "", it.Name, "the model comes from model_source, not from the item")
	require.Equal(t, "", it.Raw)
	require.Equal(t, KeyRegexp, it.Keys[0].Kind)
	require.Equal(t, KeyAny, it.Keys[1].Kind)
	require.Nil(t, it.Keys[0].PerModel)
}

func TestParsePerModelEntries(t *testing.T) {
	// Every limit a limit key takes, sorted as usual; exact names too.
	c := mustParse(t, withItems(`{"limit_by_header":"x-tier","limit_keys":[{"key":"free","token_per_hour":100,"per_model":[
		{"model":"gpt-4o","query_per_day":50,"token_per_minute":10,"max_concurrent_requests":2,"query_per_second":1}]}]}`))
	require.Equal(t, []LimitKey{{Key: "gpt-4o", Kind: KeyExact, MaxConcurrent: 2, Windows: []Window{
		{Field: "query_per_second", Unit: UnitRequests, Seconds: 1, Limit: 1},
		win("token_per_minute", 60, 10),
		{Field: "query_per_day", Unit: UnitRequests, Seconds: 86400, Limit: 50},
	}}}, c.Items[0].Keys[0].PerModel)

	// A concurrency limit alone is a limit, as in a limit key.
	c = mustParse(t, `{"rule_name":"r","global_threshold":{"token_per_minute":1,"per_model":[{"model":"o3*","max_concurrent_requests":1}]},`+redisOK+`}`)
	require.Equal(t, []LimitKey{{Key: "o3*", Kind: KeyPrefix, MaxConcurrent: 1}}, c.Global.PerModel)
	require.Equal(t, "*", c.Global.Key, "the global threshold itself is unchanged")

	// null is not set.
	c = mustParse(t, withItems(`{"limit_by_header":"h","limit_keys":[{"key":"k","token_per_minute":1,"per_model":null}]}`))
	require.Nil(t, c.Items[0].Keys[0].PerModel)
	require.False(t, c.HasModelLimits())

	// Every limit field is accepted in an entry.
	for _, f := range limitFields() {
		mustParse(t, withItems(`{"limit_by_header":"h","limit_keys":[{"key":"k","token_per_minute":1,"per_model":[{"model":"m","`+f+`":1}]}]}`, anyPrice))
	}
}

func TestParseModelSourceDefault(t *testing.T) {
	for _, extra := range []string{``, `,"model_source":null`} {
		c := mustParse(t, withGlobal(extra))
		require.Equal(t, []ModelSource{{Kind: ModelFromBody}, {Kind: ModelFromPath}}, c.ModelSources, extra)
	}
	c := mustParse(t, withGlobal(`,"model_source":["path","header::authority"]`))
	require.Equal(t, []ModelSource{{Kind: ModelFromPath}, {Kind: ModelFromHeader, Header: ":authority"}}, c.ModelSources)
	// Each configuration has its own slice.
	c.ModelSources[0].Kind = ModelFromHeader
	require.Equal(t, ModelFromBody, mustParse(t, withGlobal(``)).ModelSources[0].Kind)
}

func TestParseModelLimitKeys(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_model":"","limit_keys":[
		{"key":"gpt-4o","token_per_minute":1},{"key":"claude-*","token_per_minute":1},
		{"key":"regexp:^o[0-9]","token_per_minute":1},{"key":"*","token_per_minute":1}]},
		{"limit_by_per_model":null,"limit_keys":[{"key":"gemini-2.5*","token_per_minute":1}]}`))
	ks := c.Items[0].Keys
	require.Equal(t, []KeyKind{KeyExact, KeyPrefix, KeyRegexp, KeyAny}, []KeyKind{ks[0].Kind, ks[1].Kind, ks[2].Kind, ks[3].Kind})
	require.Equal(t, "claude-*", ks[1].Key, "a prefix is kept as written")
	require.Equal(t, ByModel, c.Items[0].Type)
	require.Equal(t, ByPerModel, c.Items[1].Type, "null selects the type, as for limit_by_consumer")
	require.Equal(t, KeyPrefix, c.Items[1].Keys[0].Kind)

	// Other types keep their key rules: a trailing '*' is an exact key there.
	c = mustParse(t, withItems(item(`"limit_by_header":"x-api-key"`, `"sk-*"`)))
	require.Equal(t, KeyExact, c.Items[0].Keys[0].Kind)
	require.Equal(t, "none", matchDesc(c, req("/", "", "x-api-key", "sk-1")))
	require.Equal(t, "limit_by_header#0/sk-*=sk-*", matchDesc(c, req("/", "", "x-api-key", "sk-*")))
}

func TestParseModelLimitsInvalid(t *testing.T) {
	key := `rule_items[0].limit_keys[0]`
	perModel := func(entries string) string {
		return withItems(`{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_day":1,"per_model":` + entries + `}]}`)
	}
	unmatched := func(threshold string) string {
		return `{"rule_name":"r","rule_items":[` + item(`"limit_by_header":"h"`, `"k"`) + `],"unmatched_threshold":` + threshold + `,` + redisOK + `}`
	}
	const most = "must be at most 9007199254740992 (2^53, the largest count Redis's Lua scripts hold exactly), got number "
	for _, tt := range []struct{ name, json, want string }{
		// model_source.
		{"sources not an array", withGlobal(`,"model_source":"body"`), `model_source: must be an array, got string "body"`},
		{"sources empty", withGlobal(`,"model_source":[]`), `model_source: must not be empty`},
		{"source number", withGlobal(`,"model_source":[1]`), `model_source[0]: must be a string, got number 1`},
		{"source unknown", withGlobal(`,"model_source":["header:x-model","body","query"]`), `model_source[2]: must be "header:<name>", "body" or "path", got "query"`},
		{"source case", withGlobal(`,"model_source":["Body"]`), `model_source[0]: must be "header:<name>", "body" or "path", got "Body"`},
		{"source empty", withGlobal(`,"model_source":[""]`), `model_source[0]: must be "header:<name>", "body" or "path", got ""`},
		{"source bare header", withGlobal(`,"model_source":["header"]`), `model_source[0]: must be "header:<name>", "body" or "path", got "header"`},
		{"source duplicate", withGlobal(`,"model_source":["body","path","body"]`), `model_source[2]: duplicate source "body"`},
		{"source duplicate header", withGlobal(`,"model_source":["header:x-model","header:X-Model"]`), `model_source[1]: duplicate source "header:X-Model"`},
		{"source bad header", withGlobal(`,"model_source":["header:x model"]`), `model_source[0]: invalid header name "x model" in "header:x model"`},
		{"source no header", withGlobal(`,"model_source":["body","header:"]`), `model_source[1]: invalid header name "" in "header:"`},

		// The model types.
		{"model value number", withItems(item(`"limit_by_model":1`, `"gpt-4o"`)), `rule_items[0].limit_by_model: must be a string (its value is ignored), got number 1`},
		{"per model value array", withItems(item(`"limit_by_per_model":[]`, `"*"`)), `rule_items[0].limit_by_per_model: must be a string (its value is ignored), got array`},
		{"two types", withItems(item(`"limit_by_model":"","limit_by_per_model":""`, `"*"`)), `rule_items[0]: only one limit_by_* field may be set, got limit_by_model, limit_by_per_model`},
		{"per model exact key", withItems(item(`"limit_by_per_model":""`, `"gpt-4o"`)), key + `.key: limit_by_per_model needs a "regexp:<re>", "<prefix>*" or "*" key, got "gpt-4o"`},
		{"model star inside", withItems(item(`"limit_by_model":""`, `"gpt-*-mini"`)), key + `.key: '*' may only end a model name, as a prefix ("claude-opus-4*"), got "gpt-*-mini"`},
		{"per model star inside", withItems(item(`"limit_by_per_model":""`, `"**"`)), key + `.key: '*' may only end a model name, as a prefix ("claude-opus-4*"), got "**"`},
		{"model bad regexp", withItems(item(`"limit_by_model":""`, `"regexp:gpt-("`)), key + ".key: invalid regexp \"gpt-(\": error parsing regexp: missing closing ): `gpt-(`"},
		{"model empty key", withItems(item(`"limit_by_model":""`, `""`)), key + `.key: must not be empty`},
		{"per header prefix key", withItems(item(`"limit_by_per_header":"x-api-key"`, `"sk-*"`)), key + `.key: limit_by_per_header needs a "regexp:<re>" or "*" key, got "sk-*"`},
		{"per_model under limit_by_model", withItems(`{"limit_by_model":"","limit_keys":[{"key":"gpt-4o","token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1}]}]}`),
			key + `.per_model: not allowed under limit_by_model: its keys match the model already`},
		{"per_model under limit_by_per_model", withItems(`{"limit_by_per_model":"","limit_keys":[{"key":"*","token_per_minute":1,"per_model":[]}]}`),
			key + `.per_model: not allowed under limit_by_per_model: its keys match the model already`},

		// per_model.
		{"per_model object", perModel(`{"gpt-4o":{"token_per_minute":1}}`), key + `.per_model: must be an array, got object`},
		{"per_model empty", perModel(`[]`), key + `.per_model: must not be empty`},
		{"entry string", perModel(`["gpt-4o"]`), key + `.per_model[0]: must be an object, got string "gpt-4o"`},
		{"entry without limit", perModel(`[{"model":"*","token_per_minute":1},{"model":"gpt-4o"}]`), key + `.per_model[1]: ` + allWindowsMsg},
		{"entry without model", perModel(`[{"token_per_minute":1}]`), key + `.per_model[0].model: required`},
		{"entry model null", perModel(`[{"model":null,"token_per_minute":1}]`), key + `.per_model[0].model: required`},
		{"entry model empty", perModel(`[{"model":"","token_per_minute":1}]`), key + `.per_model[0].model: must not be empty`},
		{"entry model number", perModel(`[{"model":4,"token_per_minute":1}]`), key + `.per_model[0].model: must be a string, got number 4`},
		{"entry bad regexp", perModel(`[{"model":"regexp:[a-","token_per_minute":1}]`), key + ".per_model[0].model: invalid regexp \"[a-\": error parsing regexp: missing closing ]: `[a-`"},
		{"entry star inside", perModel(`[{"model":"claude-*-4","token_per_minute":1}]`), key + `.per_model[0].model: '*' may only end a model name, as a prefix ("claude-opus-4*"), got "claude-*-4"`},
		{"entry nested", perModel(`[{"model":"*","token_per_minute":1,"per_model":[{"model":"x","token_per_minute":1}]}]`),
			key + `.per_model[0].per_model: not allowed in a per_model entry: per_model entries do not nest`},
		{"entry unknown field", perModel(`[{"modle":"gpt-4o","token_per_minute":1}]`), key + `.per_model[0].modle: unknown field (did you mean model?)`},
		{"entry key field", perModel(`[{"key":"gpt-4o","token_per_minute":1}]`), key + `.per_model[0].key: unknown field`},
		{"entry duplicate field", perModel(`[{"model":"a","model":"b","token_per_minute":1}]`), key + `.per_model[0].model: duplicate field`},
		{"entry zero", perModel(`[{"model":"a","token_per_minute":0}]`), key + `.per_model[0].token_per_minute: must be a positive integer, got number 0`},
		{"entry above 2^53", perModel(`[{"model":"a","token_per_day":9007199254740993}]`), key + `.per_model[0].token_per_day: ` + most + `9007199254740993`},
		{"entry concurrency above 2^53", perModel(`[{"model":"a","max_concurrent_requests":1e16}]`), key + `.per_model[0].max_concurrent_requests: ` + most + `1e16`},
		{"key with only per_model", withItems(`{"limit_by_header":"h","limit_keys":[{"key":"k","per_model":[{"model":"*","token_per_minute":1}]}]}`),
			key + `: ` + allWindowsMsg},
		{"per_model typo", withItems(`{"limit_by_header":"h","limit_keys":[{"key":"k","token_per_minute":1,"per_models":[]}]}`),
			key + `.per_models: unknown field (did you mean per_model?)`},

		// Under the thresholds.
		{"global entry without limit", global(`{"token_per_minute":1,"per_model":[{"model":"gpt-4o"}]}`), `global_threshold.per_model[0]: ` + allWindowsMsg},
		{"global only per_model", global(`{"per_model":[{"model":"*","token_per_minute":1}]}`), `global_threshold: ` + allWindowsMsg},
		{"global nested", global(`{"token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1,"per_model":[]}]}`),
			`global_threshold.per_model[0].per_model: not allowed in a per_model entry: per_model entries do not nest`},
		{"unmatched empty", unmatched(`{"token_per_minute":1,"per_model":[]}`), `unmatched_threshold.per_model: must not be empty`},
		{"unmatched entry without model", unmatched(`{"token_per_minute":1,"per_model":[{"query_per_minute":1}]}`), `unmatched_threshold.per_model[0].model: required`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseString(tt.json)
			require.Nil(t, c)
			require.EqualError(t, err, tt.want)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
		})
	}
}

func TestHasModelLimits(t *testing.T) {
	for _, tt := range []struct {
		json string
		want bool
	}{
		{higressRuleExample, false},
		{benchConfig, true},
		{withGlobal(`,"model_source":["header:x-model"]`), false}, // where to read a model is not a limit
		{withItems(item(`"limit_by_model":""`, `"gpt-4o"`)), true},
		{withItems(item(`"limit_by_per_model":""`, `"*"`)), true},
		{withItems(item(`"limit_by_header":"h"`, `"k"`) + `,{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"::/0","token_per_minute":1},
			{"key":"0.0.0.0/0","token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1}]}]}`), true},
		{global(`{"token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1}]}`), true},
		{`{"rule_name":"r","rule_items":[` + item(`"limit_by_header":"h"`, `"k"`) + `],
			"unmatched_threshold":{"token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1}]},` + redisOK + `}`, true},
		{`{"rule_name":"r","rule_items":[` + item(`"limit_by_header":"h"`, `"k"`) + `],"unmatched_threshold":{"token_per_minute":1},` + redisOK + `}`, false},
	} {
		require.Equal(t, tt.want, mustParse(t, tt.json).HasModelLimits(), tt.json)
	}
}

func global(threshold string) string {
	return `{"rule_name":"r","global_threshold":` + threshold + `,` + redisOK + `}`
}

// modelMatches summarises MatchAll's matches: "item/key=value", then
// " @model" when the match has a model, and " <parent" for a per_model
// match, naming its parent key.
func modelMatches(c *Config, r Request) []string {
	var out []string
	for _, m := range c.MatchAll(r, nil) {
		item := "?"
		switch {
		case m.Unmatched:
			item = "unmatched"
		case m.Item == nil && (m.Key == c.Global || m.Parent == c.Global):
			item = "global"
		}
		for i := range c.Items {
			if m.Item == &c.Items[i] {
				item = c.Items[i].Type.String() + "#" + itoa(i)
			}
		}
		d := item + "/" + m.Key.Key + "=" + m.Value
		if m.Model != "" {
			d += " @" + m.Model
		}
		if m.Parent != nil {
			d += " <" + m.Parent.Key
		}
		for _, o := range m.Merged()[1:] { // merged into it: the key of each, and its item's index
			d += " +" + o.Key.Key + "#" + strconv.Itoa(itemIndex(c, o.Item))
		}
		out = append(out, d)
	}
	return out
}

// itemIndex is the index of a rule item in c.Items, -1 for none.
func itemIndex(c *Config, it *RuleItem) int {
	for i := range c.Items {
		if it == &c.Items[i] {
			return i
		}
	}
	return -1
}

// The configuration of the issue: each consumer has a daily budget for all
// models, and within it a budget per model; each model has a budget for
// all consumers. A request is limited by all three.
func TestMatchBudgetsPerModel(t *testing.T) {
	c := mustParse(t, fromYAML(t, budgetsYAML))
	alice := func(model string) *fakeRequest { return req("/", "", "x-mse-consumer", "alice").withModel(model) }
	for _, tt := range []struct {
		r    *fakeRequest
		want []string
	}{
		{alice("gpt-4o"), []string{
			"limit_by_per_consumer#0/*=alice",
			"limit_by_per_consumer#0/regexp:^gpt-4o$=alice @gpt-4o <*",
			"limit_by_per_model#1/regexp:^gpt-4o$=gpt-4o @gpt-4o"}},
		{alice("claude-opus-4-20250514"), []string{
			"limit_by_per_consumer#0/*=alice",
			"limit_by_per_consumer#0/claude-opus-4*=alice @claude-opus-4-20250514 <*",
			"limit_by_per_model#1/*=claude-opus-4-20250514 @claude-opus-4-20250514"}},
		// The regexp is anchored: gpt-4o-mini is another model, which "*" takes.
		{alice("gpt-4o-mini"), []string{
			"limit_by_per_consumer#0/*=alice",
			"limit_by_per_consumer#0/*=alice @gpt-4o-mini <*",
			"limit_by_per_model#1/*=gpt-4o-mini @gpt-4o-mini"}},
		// No model: no model limit, the consumer's budget as usual.
		{alice(""), []string{"limit_by_per_consumer#0/*=alice"}},
		// No consumer: the model's budget only.
		{req("/", "").withModel("gpt-4o"), []string{"limit_by_per_model#1/regexp:^gpt-4o$=gpt-4o @gpt-4o"}},
		{req("/", ""), nil},
	} {
		require.Equal(t, tt.want, modelMatches(c, tt.r), "%+v", tt.r)
	}

	// The per_model match points into its parent's entries, and carries its subject.
	all := c.MatchAll(alice("claude-opus-4-1"), nil)
	require.Len(t, all, 3)
	parent, child := all[0], all[1]
	require.Same(t, &c.Items[0], child.Item)
	require.Same(t, &c.Items[0].Keys[0], child.Parent)
	require.Same(t, &c.Items[0].Keys[0].PerModel[1], child.Key)
	require.Same(t, parent.Key, child.Parent)
	require.Equal(t, Match{Item: &c.Items[0], Key: &c.Items[0].Keys[0], Value: "alice"}, parent, "the parent match is as before")
	require.Equal(t, Match{Item: &c.Items[1], Key: &c.Items[1].Keys[1], Value: "claude-opus-4-1", Model: "claude-opus-4-1"}, all[2])
}

// Under rule_match_mode first, the first matching item applies, followed
// by its per_model match; Match returns the first match alone.
func TestMatchPerModelFirstMode(t *testing.T) {
	c := mustParse(t, fromYAML(t, strings.Replace(budgetsYAML, "rule_match_mode: all", "rule_match_mode: first", 1)))
	require.Equal(t, MatchFirst, c.MatchMode)
	r := req("/", "", "x-mse-consumer", "bob").withModel("gpt-4o")
	require.Equal(t, []string{"limit_by_per_consumer#0/*=bob", "limit_by_per_consumer#0/regexp:^gpt-4o$=bob @gpt-4o <*"}, modelMatches(c, r))
	m, ok := c.Match(r)
	require.True(t, ok)
	require.Equal(t, Match{Item: &c.Items[0], Key: &c.Items[0].Keys[0], Value: "bob"}, m)

	// Without a consumer, the model item is the first that matches.
	r = req("/", "").withModel("o3")
	require.Equal(t, []string{"limit_by_per_model#1/*=o3 @o3"}, modelMatches(c, r))
	m, ok = c.Match(r)
	require.True(t, ok)
	require.Equal(t, "o3", m.Model)
	require.Nil(t, m.Parent)
}

// The first entry that matches applies, in configuration order, not the
// most specific one; a model no entry matches has no per_model limit.
func TestMatchPerModelFirstEntryWins(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_header":"x-tier","limit_keys":[{"key":"free","token_per_day":1000,"per_model":[
		{"model":"gpt-4o","token_per_minute":1},
		{"model":"gpt-4*","token_per_minute":2},
		{"model":"gpt-4o-mini","token_per_minute":3},
		{"model":"regexp:^o[0-9]","token_per_minute":4}]}]}`))
	free := func(model string) *fakeRequest { return req("/", "", "x-tier", "free").withModel(model) }
	for model, want := range map[string]string{
		"gpt-4o":      "gpt-4o",
		"gpt-4o-mini": "gpt-4*", // the prefix comes first
		"gpt-4":       "gpt-4*", // a prefix matches the name itself
		"o3-mini":     "regexp:^o[0-9]",
		"GPT-4o":      "", // case matters
		"claude-4":    "",
	} {
		got := modelMatches(c, free(model))
		if want == "" {
			require.Equal(t, []string{"limit_by_header#0/free=free"}, got, model)
			continue
		}
		require.Equal(t, []string{"limit_by_header#0/free=free", "limit_by_header#0/" + want + "=free @" + model + " <free"}, got, model)
	}
}

// limit_by_model: all models one key matches share its counter (Value is
// the key), like limit_by_header; limit_by_per_model: each model its own
// (Value is the model), like limit_by_per_header.
func TestMatchByModelSharedAndPerModel(t *testing.T) {
	c := mustParse(t, `{"rule_name":"r","rule_match_mode":"all","rule_items":[
		{"limit_by_model":"","limit_keys":[{"key":"gpt-4o","token_per_minute":1},{"key":"claude-*","token_per_minute":2},{"key":"regexp:^o[0-9]","token_per_minute":3}]},
		{"limit_by_per_model":"","limit_keys":[{"key":"claude-*","token_per_minute":4},{"key":"regexp:mini","token_per_minute":5}]},
		{"limit_by_model":"","limit_keys":[{"key":"*","token_per_minute":6}]}],`+redisOK+`}`)
	for _, tt := range []struct {
		model string
		want  []string
	}{
		{"claude-sonnet-4", []string{"limit_by_model#0/claude-*=claude-* @claude-sonnet-4", "limit_by_per_model#1/claude-*=claude-sonnet-4 @claude-sonnet-4", "limit_by_model#2/*=* @claude-sonnet-4"}},
		{"claude-opus-4", []string{"limit_by_model#0/claude-*=claude-* @claude-opus-4", "limit_by_per_model#1/claude-*=claude-opus-4 @claude-opus-4", "limit_by_model#2/*=* @claude-opus-4"}},
		{"gpt-4o", []string{"limit_by_model#0/gpt-4o=gpt-4o @gpt-4o", "limit_by_model#2/*=* @gpt-4o"}},
		{"gpt-4o-mini", []string{"limit_by_per_model#1/regexp:mini=gpt-4o-mini @gpt-4o-mini", "limit_by_model#2/*=* @gpt-4o-mini"}}, // an exact key is exact
		{"o4-mini", []string{"limit_by_model#0/regexp:^o[0-9]=regexp:^o[0-9] @o4-mini", "limit_by_per_model#1/regexp:mini=o4-mini @o4-mini", "limit_by_model#2/*=* @o4-mini"}},
		{"claude", []string{"limit_by_model#2/*=* @claude"}}, // "claude-*" needs the dash
		{"", nil}, // no model: no model item matches
	} {
		require.Equal(t, tt.want, modelMatches(c, req("/", "").withModel(tt.model)), tt.model)
	}
}

// per_model under the thresholds: the threshold, then the model's limit in
// it, with the threshold's (nil) item and its Unmatched.
func TestMatchPerModelUnderThresholds(t *testing.T) {
	c := mustParse(t, global(`{"token_per_minute":100,"per_model":[{"model":"gpt-4o","token_per_minute":10}]}`))
	require.Equal(t, []string{"global/*=", "global/gpt-4o= @gpt-4o <*"}, modelMatches(c, req("/", "").withModel("gpt-4o")))
	require.Equal(t, []string{"global/*="}, modelMatches(c, req("/", "").withModel("o3")))
	require.Equal(t, []string{"global/*="}, modelMatches(c, req("/", "")))
	all := c.MatchAll(req("/", "").withModel("gpt-4o"), nil)
	require.Equal(t, Match{Key: &c.Global.PerModel[0], Model: "gpt-4o", Parent: c.Global}, all[1])
	m, ok := c.Match(req("/", "").withModel("gpt-4o"))
	require.True(t, ok)
	require.Equal(t, Match{Key: c.Global}, m)

	for _, mode := range []string{"first", "all"} {
		c = mustParse(t, `{"rule_name":"r","rule_match_mode":"`+mode+`","rule_items":[`+item(`"limit_by_header":"x-api-key"`, `"sk-1"`)+`],
			"unmatched_threshold":{"token_per_minute":100,"per_model":[{"model":"regexp:^gpt","token_per_minute":10},{"model":"*","query_per_minute":1}]},`+redisOK+`}`)
		require.Equal(t, []string{"limit_by_header#0/sk-1=sk-1"}, modelMatches(c, req("/", "", "x-api-key", "sk-1").withModel("gpt-4o")), mode)
		require.Equal(t, []string{"unmatched/*=", "unmatched/regexp:^gpt= @gpt-4o <*"}, modelMatches(c, req("/", "").withModel("gpt-4o")), mode)
		require.Equal(t, []string{"unmatched/*=", "unmatched/*= @o3 <*"}, modelMatches(c, req("/", "").withModel("o3")), mode)
		require.Equal(t, []string{"unmatched/*="}, modelMatches(c, req("/", "")), mode)
		all = c.MatchAll(req("/", "").withModel("o3"), nil)
		require.Equal(t, Match{Key: &c.Unmatched.PerModel[1], Unmatched: true, Model: "o3", Parent: c.Unmatched}, all[1], mode)
	}
}

// A repeated parameter limits each reading: each parent match is followed
// by its own per_model match, and a subject both readings name is limited
// once, its model too.
func TestMatchPerModelWithRepeatedParameter(t *testing.T) {
	items := `{"limit_by_param":"apikey","limit_keys":[{"key":"regexp:^k","token_per_minute":1,"per_model":[{"model":"*","token_per_minute":1}]}]},
		{"limit_by_per_param":"apikey","limit_keys":[{"key":"*","token_per_minute":1,"per_model":[{"model":"gpt*","token_per_minute":1}]}]}`
	perParam := []string{
		"limit_by_per_param#1/*=a", "limit_by_per_param#1/gpt*=a @gpt-4o <*",
		"limit_by_per_param#1/*=b", "limit_by_per_param#1/gpt*=b @gpt-4o <*",
	}
	byParam := []string{"limit_by_param#0/regexp:^k=regexp:^k", "limit_by_param#0/*=regexp:^k @gpt-4o <regexp:^k"}

	c := mustParse(t, withItems(items, `"rule_match_mode":"first",`))
	require.Equal(t, perParam, modelMatches(c, req("/v1?apikey=a&apikey=b", "").withModel("gpt-4o")))
	require.Equal(t, byParam, modelMatches(c, req("/v1?apikey=k1&apikey=k2", "").withModel("gpt-4o")))

	// Every item: the keys' shared subject once, each reading's own.
	c = mustParse(t, withItems(items))
	require.Equal(t, perParam, modelMatches(c, req("/v1?apikey=a&apikey=b", "").withModel("gpt-4o")))
	require.Equal(t, append(byParam,
		"limit_by_per_param#1/*=k1", "limit_by_per_param#1/gpt*=k1 @gpt-4o <*",
		"limit_by_per_param#1/*=k2", "limit_by_per_param#1/gpt*=k2 @gpt-4o <*",
	), modelMatches(c, req("/v1?apikey=k1&apikey=k2", "").withModel("gpt-4o")))

	// Into a slice that holds earlier matches: those are left alone.
	dst := c.MatchAll(req("/v1?apikey=k1", "").withModel("gpt-4o"), nil)
	dst = c.MatchAll(req("/v1?apikey=k1", "").withModel("gpt-4o"), dst)
	require.Len(t, dst, 8)
	require.Equal(t, dst[:4], dst[4:])
}

// Matching with models allocates nothing: the model is the request's
// string, and the per_model match goes into the caller's slice.
func TestMatchAllWithModelsAllocatesNothing(t *testing.T) {
	c := mustParse(t, benchConfig)
	buf := make([]Match, 0, 8)
	for _, tt := range []struct {
		r    *fakeRequest
		want int
	}{
		{req("/", "", "x-mse-consumer", "vip-1").withModel("claude-sonnet-4"), 2}, // the parent and its per_model match
		{req("/", "", "x-mse-consumer", "vip-1").withModel("gpt-4o"), 2},          // a regexp entry
		{req("/", "", "x-mse-consumer", "vip-1"), 1},                              // no model
		{req("/", "").withModel("gpt-4o-mini"), 1},                                // limit_by_per_model
		{req("/", ""), 0},
	} {
		require.Len(t, c.MatchAll(tt.r, buf[:0]), tt.want, "%+v", tt.r)
		require.Zero(t, testing.AllocsPerRun(100, func() { c.MatchAll(tt.r, buf[:0]) }), "%+v", tt.r)
	}
}
