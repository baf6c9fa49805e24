package config

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// A request whose model cannot be told (UnknownModel: a body no parser
// reads alike) is limited as strictly as any model could be: every
// per_model entry, every key of the model items, in the subject of the
// model an exact key names, or one of its own for a pattern (issue 25).
func TestMatchUnknownModel(t *testing.T) {
	c := mustParse(t, fromYAML(t, `
rule_name: r
rule_match_mode: first
rule_items:
  - limit_by_per_consumer: ''
    limit_keys:
      - key: "*"
        token_per_day: 1000
        per_model:
          - model: gpt-4o
            token_per_minute: 10
          - model: "claude-*"
            token_per_minute: 20
  - limit_by_per_model: ''
    limit_keys:
      - key: "gpt-4o*"
        token_per_minute: 30
      - key: "*"
        token_per_minute: 40
  - limit_by_model: ''
    limit_keys:
      - key: gpt-4o
        token_per_minute: 50
      - key: "regexp:^o\\d"
        token_per_minute: 60
redis:
  service_name: redis.static
`))
	r := req("/", "", "x-mse-consumer", "alice").withModel(UnknownModel)
	require.Equal(t, []string{
		"limit_by_per_consumer#0/*=alice",
		"limit_by_per_consumer#0/gpt-4o=alice @gpt-4o <*",
		"limit_by_per_consumer#0/claude-*=alice @?claude-* <*",
		"limit_by_per_model#1/gpt-4o*=?gpt-4o* @?gpt-4o*",
		"limit_by_per_model#1/*=?* @?*",
		"limit_by_model#2/gpt-4o=gpt-4o @gpt-4o",
		`limit_by_model#2/regexp:^o\d=regexp:^o\d @?regexp:^o\d`,
	}, modelMatches(c, r))
}

// Weighted, an unknown model costs the largest weight of each kind.
func TestUnknownModelWeights(t *testing.T) {
	c := mustParse(t, fromYAML(t, `
rule_name: r
global_threshold:
  token_per_minute: 100
token_count_strategy: weighted
token_weights:
  input: 1
  output: 2
  models:
    big-in:
      input: 5
    big-out:
      output: 9
redis:
  service_name: redis.static
`))
	require.Equal(t, int64(10*5+10*9), c.Cost.Tokens(10, 10, 0, 0, UnknownModel))
	require.Equal(t, int64(10*1+10*2), c.Cost.Tokens(10, 10, 0, 0, "other"))
}

func TestParseAmbiguousBody(t *testing.T) {
	require.Equal(t, AmbiguousStrictest, mustParse(t, global(`{"token_per_minute":1}`)).AmbiguousBody)
	c := mustParse(t, `{"rule_name":"r","ambiguous_body":"reject","global_threshold":{"token_per_minute":1},`+redisOK+`}`)
	require.Equal(t, AmbiguousReject, c.AmbiguousBody)
	_, err := Parse(gjson.Parse(`{"rule_name":"r","ambiguous_body":"allow","global_threshold":{"token_per_minute":1},` + redisOK + `}`))
	require.EqualError(t, err, `ambiguous_body: must be "strictest" or "reject", got "allow"`)
}
