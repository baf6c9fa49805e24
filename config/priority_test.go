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

	prod := Match{Key: &c.Items[0].Keys[0]}
	other := Match{Key: batch}
	assert.Equal(t, 0, c.LevelOf([]Match{other, prod}, "low"), "a key's priority beats the header")
	assert.Equal(t, 1, c.LevelOf([]Match{other}, "normal"), "the header's level")
	assert.Equal(t, 2, c.LevelOf([]Match{other}, "urgent"), "an unknown level: the default")
	assert.Equal(t, 2, c.LevelOf(nil, ""))

	noPriority := mustParse(t, withItems(`{"limit_by_header":"x","limit_keys":[{"key":"k","token_per_minute":10}]}`))
	assert.Equal(t, 0, noPriority.LevelOf(nil, "high"))
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
