package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// Issue 36: limit_by_api_key reads the key wherever an SDK or a provider's
// API puts it: Authorization (Bearer, any spelling), x-api-key, api-key,
// x-goog-api-key, ?key=. One key in two places is one key; two keys are
// two.
func TestAPIKeysWhereverTheyAre(t *testing.T) {
	keys := func(r Request) []string {
		k, n := APIKeys(r)
		return k[:n]
	}
	for name, c := range map[string]struct {
		r    *fakeRequest
		want []string
	}{
		"OpenAI: Bearer":             {req("/v1/chat/completions", "", "authorization", "Bearer sk-1"), []string{"sk-1"}},
		"Bearer in any spelling":     {req("/", "", "authorization", " bearer \t sk-1 "), []string{"sk-1"}},
		"Anthropic: x-api-key":       {req("/v1/messages", "", "x-api-key", "sk-ant-1"), []string{"sk-ant-1"}},
		"Azure: api-key":             {req("/openai/deployments/d/chat/completions", "", "api-key", "az-1"), []string{"az-1"}},
		"Gemini SDK: x-goog-api-key": {req("/v1beta/models/g:generateContent", "", "x-goog-api-key", "AIza1"), []string{"AIza1"}},
		"Gemini REST: ?key=":         {req("/v1beta/models/g:generateContent?alt=sse&key=AIza%312", ""), []string{"AIza12"}},
		"one key in two places":      {req("/", "", "authorization", "Bearer sk-1", "x-api-key", "sk-1"), []string{"sk-1"}},
		"two keys":                   {req("/?key=sk-3", "", "authorization", "Bearer sk-1", "x-api-key", "sk-2"), []string{"sk-1", "sk-2", "sk-3"}},
		"a repeated parameter":       {req("/?key=a&key=b", ""), []string{"a", "b"}},
		"another scheme stays":       {req("/", "", "authorization", "basic dXNlcjpwdw=="), []string{"Basic dXNlcjpwdw=="}},
		"none":                       {req("/?keys=x", "", "x-api-keys", "y", "authorization", "Bearer "), []string{}},
	} {
		assert.Equal(t, c.want, keys(c.r), name)
	}
}

// Every key a request carries is limited under a limit_by_per_api_key
// item; a key sent twice counts once; an exact key matches in any place;
// the value is a credential (fingerprinted where shown).
func TestAPIKeyItemsMatchEveryKey(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]},
		{"limit_by_api_key": null, "limit_keys": [{"key": "sk-gold", "token_per_minute": 1000}]}`))
	require.True(t, c.Items[0].Secret)
	values := func(r Request) []string {
		var out []string
		for _, m := range c.MatchAll(r, nil) {
			out = append(out, m.Item.Type.String()+" "+m.Value)
		}
		return out
	}
	assert.Equal(t, []string{"limit_by_per_api_key sk-1"}, values(req("/", "", "authorization", "Bearer sk-1", "x-api-key", "sk-1")))
	assert.Equal(t, []string{"limit_by_per_api_key sk-1", "limit_by_per_api_key sk-2"},
		values(req("/", "", "authorization", "Bearer sk-1", "x-goog-api-key", "sk-2")), "each key, limited")
	assert.Equal(t, []string{"limit_by_per_api_key sk-gold", "limit_by_api_key sk-gold"}, values(req("/v1beta/x?key=sk-gold", "")))
	assert.Empty(t, values(req("/", "")))

	m, ok := c.Match(req("/", "", "api-key", "sk-1"))
	require.True(t, ok)
	assert.Equal(t, "sk-1", m.Value)
	assert.Equal(t, Fingerprint("sk-1"), m.ShownValue())

	// An operator names the key as the client sends it, or bare.
	for _, v := range []string{"sk-1", "Bearer sk-1", " sk-1 "} {
		ms, err := c.Resolve(SubjectRef{Item: 0, Value: v})
		require.NoError(t, err, v)
		assert.Equal(t, "sk-1", ms[0].Value, v)
	}

	// rule_match_mode first: every key (issue 50, point 6: the middle one
	// was never read), each a reading of its own, in which the first item
	// that matches applies.
	c = mustParse(t, withItems(`{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]}`, `"rule_match_mode": "first",`))
	assert.Len(t, c.MatchAll(req("/", "", "authorization", "Bearer sk-1", "x-api-key", "sk-2"), nil), 2)
	three := req("/?key=sk-5&key=sk-6", "", "x-api-key", "sk-1", "api-key", "sk-2", "x-goog-api-key", "sk-3")
	assert.Equal(t, []string{"limit_by_per_api_key#0/*=sk-1", "limit_by_per_api_key#0/*=sk-2", "limit_by_per_api_key#0/*=sk-3",
		"limit_by_per_api_key#0/*=sk-5", "limit_by_per_api_key#0/*=sk-6"}, matchesDesc(c, three))
	c = mustParse(t, withItems(`{"limit_by_api_key": "", "limit_keys": [{"key": "regexp:^vip-", "token_per_minute": 1000}]},
		{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]}`, `"rule_match_mode": "first",`))
	assert.Equal(t, []string{"limit_by_api_key#0/regexp:^vip-=regexp:^vip-", "limit_by_per_api_key#1/*=sk-2"},
		matchesDesc(c, req("/", "", "x-api-key", "vip-made-up", "api-key", "sk-2")), "a made-up vip key does not spare the real one")
	m, ok = c.Match(req("/", "", "x-api-key", "sk-1", "api-key", "vip-1"))
	require.True(t, ok)
	assert.Equal(t, "sk-1", m.Value, "Match: the first reading's")

	_, err := Parse(gjson.Parse(withItems(`{"limit_by_per_api_key": 1, "limit_keys": [{"key": "*", "token_per_minute": 100}]}`)))
	assert.ErrorContains(t, err, "must be a string (its value is ignored)")
	_, err = Parse(gjson.Parse(withItems(`{"limit_by_per_api_key": "", "limit_keys": [{"key": "sk-1", "token_per_minute": 100}]}`)))
	assert.ErrorContains(t, err, `limit_by_per_api_key needs a "regexp:<re>" or "*" key`)
}

// Issue 36: an API key item and an item reading a header an API key travels
// in both limit a request that carries it: a note, as for two items of one
// header (atrl check and the start log print it).
func TestAPIKeyItemsOverlapTheHeadersTheyRead(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_api_key": "", "limit_keys": [{"key": "*", "token_per_minute": 100}]},
		{"limit_by_per_header": "x-api-key", "limit_keys": [{"key": "*", "token_per_minute": 100}]},
		{"limit_by_per_header": "x-team", "limit_keys": [{"key": "*", "token_per_minute": 100}]},
		{"limit_by_param": "key", "limit_keys": [{"key": "k", "token_per_minute": 100}]}`))
	var texts []string
	for _, o := range c.Overlaps() {
		assert.False(t, o.Merged)
		texts = append(texts, o.Text[:strings.Index(o.Text, " read")])
	}
	assert.Equal(t, []string{
		"rule_items[0] (limit_by_per_api_key) and rule_items[1] (limit_by_per_header x-api-key)",
		"rule_items[0] (limit_by_per_api_key) and rule_items[3] (limit_by_param key)",
	}, texts)
}
