package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const levels = `"priority":{"levels":["high","normal","low"],"header":"X-Priority"},`

func TestPriorityLevelsAndShares(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_header":"x-tier","limit_keys":[
		{"key":"prod","priority":"high","token_per_minute":1000},
		{"key":"batch","token_per_minute":1000,"reserve":{"high":20,"normal":10},"max_concurrent_requests":10}]}`, levels))
	require.NotNil(t, c.Priority)
	assert.Equal(t, []string{"high", "normal", "low"}, c.Priority.Levels)
	assert.Equal(t, 2, c.Priority.Default, "unset: the lowest")
	assert.Equal(t, "x-priority", c.Priority.Header)

	batch := &c.Items[0].Keys[1]
	w := &batch.Windows[0]
	assert.Equal(t, []int64{100, 80, 70}, []int64{w.Open(0), w.Open(1), w.Open(2)}, "high all of it, normal 80 %, low 70 %")
	assert.Equal(t, int64(70), batch.ConcurrentOpen(2))
	assert.Equal(t, int64(100), c.Items[0].Keys[0].Windows[0].Open(2), "no reserve: open to every level")

	level := func(c *Config, r *fakeRequest, header string) int {
		h := NoLevel
		if header != "" {
			h = c.Priority.HeaderLevel(h, header)
		}
		return c.LevelOf(r, nil, c.MatchAll(r, nil), h)
	}
	assert.Equal(t, 0, level(c, req("/", "", "x-tier", "prod"), "low"), "a key's priority beats the header")
	assert.Equal(t, 1, level(c, req("/", "", "x-tier", "batch"), "normal"), "a key without one: the header's level")
	assert.Equal(t, 1, level(c, req("/", "", "x-tier", "dev"), "normal"), "no key: the header's level")
	assert.Equal(t, 2, level(c, req("/", "", "x-tier", "batch"), "urgent"), "an unknown level: the default")
	assert.Equal(t, 1, level(c, req("/", ""), "normal"), "no value: the header's level")
	assert.Equal(t, 2, level(c, req("/", ""), ""))

	noPriority := mustParse(t, withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`))
	assert.Equal(t, 0, noPriority.LevelOf(req("/", ""), nil, nil, 2))
}

// Issue 50, point 5: where a request's readings disagree, the least
// privileged one gives its level: a made-up value can lower it, never lift
// it.
func TestPriorityLevelIsTheLeastPrivilegedReading(t *testing.T) {
	const levels = `"priority":{"levels":["high","normal","low"],"default":"normal"},`
	keys := `{"key":"regexp:^sk-vip-","priority":"high","token_per_minute":10},
		{"key":"regexp:^sk-batch-","priority":"low","token_per_minute":10},
		{"key":"*","token_per_minute":10}`
	level := func(c *Config, r *fakeRequest, header int, others ...string) int {
		return c.LevelOf(r, others, c.MatchAll(r, nil), header)
	}
	for _, mode := range []string{"all", "first"} {
		c := mustParse(t, withItems(`{"limit_by_per_api_key":"","limit_keys":[`+keys+`]}`, levels, `"rule_match_mode":"`+mode+`",`))
		assert.Equal(t, 0, level(c, req("/", "", "x-api-key", "sk-vip-1"), NoLevel), mode)
		assert.Equal(t, 1, level(c, req("/", "", "authorization", "Bearer sk-plain", "x-goog-api-key", "sk-vip-made-up"), NoLevel),
			"%s: a key of no priority gives the default", mode)
		assert.Equal(t, 0, level(c, req("/", "", "authorization", "Bearer sk-plain", "x-goog-api-key", "sk-vip-made-up"), 0),
			"%s: or the header's level", mode)
		assert.Equal(t, 2, level(c, req("/", "", "x-api-key", "sk-vip-1", "api-key", "sk-batch-2"), NoLevel), mode)
		assert.Equal(t, 2, level(c, req("/?key=sk-vip-2&key=sk-batch-3", "", "x-api-key", "sk-vip-1"), 0), "%s: the parameter's last key", mode)
		assert.Equal(t, 2, level(c, req("/", "", "x-api-key", "sk-vip-1", "api-key", "sk-vip-2", "x-goog-api-key", "sk-batch-3"), NoLevel),
			"%s: a key in the middle", mode)
	}

	// Under first, an item the request does not reach still reads it.
	c := mustParse(t, withItems(`{"limit_by_per_api_key":"","limit_keys":[{"key":"regexp:^sk-team-","token_per_minute":10}]},
		{"limit_by_api_key":"","limit_keys":[{"key":"regexp:^sk-vip-","priority":"high","token_per_minute":10}]}`, levels, `"rule_match_mode":"first",`))
	assert.Equal(t, 1, level(c, req("/", "", "x-api-key", "sk-team-1", "api-key", "sk-vip-made-up"), NoLevel))
	assert.Equal(t, 0, level(c, req("/", "", "api-key", "sk-vip-1"), NoLevel))

	// Across items, the lowest; an item whose keys have no priority, or
	// that the request carries no value for, gives none.
	c = mustParse(t, withItems(`{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"0.0.0.0/0","token_per_minute":10}]},
		{"limit_by_per_ip":"from-header-x-real-ip","limit_keys":[{"key":"10.0.0.0/8","priority":"high","token_per_minute":10}]},
		{"limit_by_consumer":"","limit_keys":[{"key":"prod","priority":"high","token_per_minute":10},{"key":"ops","priority":"normal","token_per_minute":10}]},
		{"limit_by_param":"tier","limit_keys":[{"key":"gold","priority":"high","token_per_minute":10}]},
		{"limit_by_per_cookie":"team","limit_keys":[{"key":"regexp:^core$","priority":"high","token_per_minute":10}]}`,
		`"priority":{"levels":["high","normal","low"]},`))
	for _, tt := range []struct {
		r    *fakeRequest
		want int
		why  string
	}{
		{req("/", "1.2.3.4:5", "x-mse-consumer", "prod"), 0, "one item"},
		{req("/", "1.2.3.4:5", "x-mse-consumer", "prod", "x-real-ip", "10.0.0.1"), 0, "two items of high"},
		{req("/", "1.2.3.4:5", "x-mse-consumer", "ops", "x-real-ip", "10.0.0.1"), 1, "high and normal: normal"},
		{req("/", "1.2.3.4:5", "x-mse-consumer", "prod", "x-real-ip", "192.0.2.1"), 2, "an address no key matches: the default"},
		{req("/?tier=gold", "1.2.3.4:5"), 0, ""},
		{req("/?tier=gold&tier=tin", "1.2.3.4:5"), 2, "a repeated parameter: its last value matches no key"},
		{req("/?tier=tin&tier=gold", "1.2.3.4:5"), 2, "its first"},
		{req("/", "1.2.3.4:5", "cookie", "team=core"), 0, ""},
		{req("/", "1.2.3.4:5", "cookie", "team=core; team=else"), 2, "a repeated cookie"},
		{req("/", "1.2.3.4:5", "x-mse-consumer", "prod", "cookie", "team=else"), 2, "any item's made-up value lowers it"},
		{req("/", "1.2.3.4:5"), 2, "no value: the default"},
	} {
		assert.Equal(t, tt.want, level(c, tt.r, NoLevel), "%v: %s", tt.r, tt.why)
	}

	// global_threshold and unmatched_threshold give their priority.
	c = mustParse(t, `{"rule_name":"r","priority":{"levels":["high","low"]},
		"global_threshold":{"token_per_minute":10,"priority":"high"},
		"unmatched_threshold":{"token_per_minute":10,"priority":"low"},
		"rule_items":[{"limit_by_header":"x-tier","limit_keys":[{"key":"prod","priority":"high","token_per_minute":10},{"key":"dev","priority":"low","token_per_minute":10}]}],`+redisOK+`}`)
	assert.Equal(t, 0, level(c, req("/", "", "x-tier", "prod"), NoLevel))
	assert.Equal(t, 1, level(c, req("/", "", "x-tier", "dev"), 0))
	assert.Equal(t, 1, level(c, req("/", ""), 0), "unmatched")

	// A model item reads the model, and each of an ambiguous body's others.
	c = mustParse(t, withItems(`{"limit_by_model":"","limit_keys":[{"key":"gpt-4o","priority":"high","token_per_minute":10},
		{"key":"gpt-4o-mini","priority":"low","token_per_minute":10}]}`, levels))
	assert.Equal(t, 0, level(c, req("/", "").withModel("gpt-4o"), NoLevel))
	assert.Equal(t, 1, level(c, req("/", "").withModel("gpt-4o"), NoLevel, "o3"), "another model no key matches: the default")
	assert.Equal(t, 2, level(c, req("/", "").withModel("gpt-4o"), NoLevel, "gpt-4o-mini"))
	assert.Equal(t, 2, level(c, req("/", "").withModel(UnknownModel), NoLevel), "a model that cannot be told may be any")
	assert.Equal(t, 1, level(c, req("/", "").withModel(""), 1), "no model: the header's level")
}

// The priority header: every line and every comma-separated value of it
// counts, the lowest level wins, a value that names none is the default.
func TestPriorityHeaderLevel(t *testing.T) {
	p := mustParse(t, withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`,
		`"priority":{"levels":["high","normal","low"],"default":"normal"},`)).Priority
	for _, tt := range []struct {
		lines []string
		want  int
	}{
		{nil, NoLevel},
		{[]string{"high"}, 0},
		{[]string{" high\t"}, 0},
		{[]string{"high", "low"}, 2},
		{[]string{"low", "high"}, 2},
		{[]string{"high, normal"}, 1},
		{[]string{"high,urgent"}, 1},
		{[]string{"high", ""}, 1},
		{[]string{"HIGH"}, 1},
		{[]string{"high", "high"}, 0},
	} {
		l := NoLevel
		for _, line := range tt.lines {
			l = p.HeaderLevel(l, line)
		}
		assert.Equal(t, tt.want, l, "%q", tt.lines)
	}
}

// LevelOf allocates nothing.
func TestPriorityLevelAllocations(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_api_key":"","limit_keys":[{"key":"regexp:^sk-vip-","priority":"high","token_per_minute":10},{"key":"*","token_per_minute":10}]},
		{"limit_by_per_ip":"from-remote-addr","limit_keys":[{"key":"10.0.0.0/8","priority":"high","token_per_minute":10}]},
		{"limit_by_per_cookie":"team","limit_keys":[{"key":"regexp:^core$","priority":"high","token_per_minute":10}]}`, levels))
	r := req("/?key=sk-vip-2", "10.0.0.1:5", "authorization", "Bearer sk-vip-1", "x-api-key", "sk-other", "cookie", "team=core; team=x")
	matches := c.MatchAll(r, nil)
	others := []string{"gpt-4o"}
	require.Equal(t, 2, c.LevelOf(r, others, matches, NoLevel))
	assert.Zero(t, testing.AllocsPerRun(100, func() { c.LevelOf(r, others, matches, c.Priority.HeaderLevel(NoLevel, "high, normal")) }))
}

func TestShareIsExactUpToMaxLimit(t *testing.T) {
	assert.Equal(t, int64(700), Share(1000, 70))
	assert.Equal(t, int64(699), Share(999, 70), "rounded down: 699.3")
	assert.Equal(t, int64(MaxLimit), Share(MaxLimit, 100))
	assert.Equal(t, int64(MaxLimit/100*99+MaxLimit%100*99/100), Share(MaxLimit, 99))
}

func TestPriorityErrors(t *testing.T) {
	key := func(extra string) string {
		return withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10`+extra+`}]}`, levels)
	}
	for _, tt := range []struct{ json, want string }{
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10,"reserve":{"high":30}}]}`),
			"rule_items[0].limit_keys[0].reserve: needs priority at the top level: the levels, highest first"},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10,"priority":"high"}]}`),
			"rule_items[0].limit_keys[0].priority: needs priority at the top level: the levels, highest first"},
		{key(`,"priority":"urgent"`), `rule_items[0].limit_keys[0].priority: unknown level "urgent" (levels: high, normal, low)`},
		{key(`,"reserve":{"urgent":10}`), `rule_items[0].limit_keys[0].reserve.urgent: unknown level "urgent" (levels: high, normal, low)`},
		{key(`,"reserve":{"high":60,"normal":40}`),
			"rule_items[0].limit_keys[0].reserve: keeps 100 % for the levels above the lowest: it must leave it some (less than 100 in all)"},
		{key(`,"reserve":{"low":10}`),
			"rule_items[0].limit_keys[0].reserve.low: keeps part of the limit for the lowest level, which every request is at least: reserve for the levels above it"},
		{key(`,"reserve":{"high":0}`), "rule_items[0].limit_keys[0].reserve.high: must be an integer between 1 and 99, got number 0"},
		{key(`,"reserve":{}`), "rule_items[0].limit_keys[0].reserve: must keep a percent for at least one level"},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"levels":["high"]},`),
			"priority.levels: must name 2 to 8 levels, got 1"},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"levels":["a","a"]},`),
			`priority.levels[1]: names "a" twice`},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"levels":["a","b c"]},`),
			`priority.levels[1]: must be a name of letters, digits, '_' and '-', got "b c"`},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"levels":["a","b"],"default":"c"},`),
			`priority.default: unknown level "c" (levels: a, b)`},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"levels":["a","b"],"header":"x priority"},`),
			`priority.header: invalid header name "x priority"`},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`, `"priority":{"default":"a"},`),
			`priority: needs "levels": the levels, highest first`},
		{withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10,"per_model":[{"model":"*","token_per_minute":5,"priority":"high"}]}]}`, levels),
			`rule_items[0].limit_keys[0].per_model[0].priority: unknown field`},
	} {
		_, err := ParseString(tt.json)
		require.Error(t, err, tt.json)
		assert.Contains(t, err.Error(), tt.want, tt.json)
	}
}
