package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// rulesYAML is a document as Higress hands it to the plugin: a global
// configuration and one rule per route.
const rulesYAML = `rule_name: everyone
global_threshold:
  token_per_day: 100000
redis:
  service_name: redis.static
_rules_:
  - _match_route_: [chat]
    rule_name: chat
    rule_items:
      - limit_by_header: x-api-key
        limit_keys:
          - key: sk-1
            token_per_minute: 100
          - key: sk-gold
            token_per_minute: 1000
    redis:
      service_name: redis.static
  - _match_route_: [batch]
    _match_domain_: ["*.example.com"]
    rule_name: batch
    rule_items:
      - limit_by_per_header: x-api-key
        limit_keys:
          - key: "*"
            token_per_minute: 0
    redis:
      service_name: redis.static
`

func TestCheckValid(t *testing.T) {
	path := writeFile(t, "plugin.yaml", strings.Replace(rulesYAML, "token_per_minute: 0", "token_per_minute: 10", 1))
	start := time.Now()
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, exitOK, status)
	assert.Empty(t, errOut)
	assert.Equal(t, lines(
		path+`: ok: rule "everyone" limits every request (global_threshold)`+redis,
		path+`: ok: _rules_[0] (route chat): rule "chat" limits limit_by_header x-api-key (2 keys)`+redis,
		path+`: ok: _rules_[1] (route batch; domain *.example.com): rule "batch" limits limit_by_per_header x-api-key (1 key)`+redis,
	), out)

	// The example make run starts the local gateway with.
	status, out, errOut = atrl("", "check", "-config", "../../tools/localgw/example.yaml")
	assert.Equal(t, exitOK, status, errOut)
	example := "../../tools/localgw/example.yaml: "
	assert.Equal(t, lines(example+`ok: rule "local-demo" limits every request (global_threshold), limit_by_per_api_key (1 key)`+
		`; when a model has no room, serves mock-large as mock`+redis,
		example+`note: pricing: models no pricing entry names are priced at their list price in the catalog (`+pricing.Source+
			`); models it does not list either, at pricing's "*"`,
		example+`price: mock: $2.5 input, $10 output, $2.5 cache read, $2.5 cache write per million tokens (pricing: "*")`,
		example+`price: mock-large: $2.5 input, $10 output, $2.5 cache read, $2.5 cache write per million tokens (pricing: "*")`,
	), out)
}

// A configuration that prices requests: the price of each model it names
// and each -model asked for, and where it comes from.
func TestCheckSaysEachModelsPrice(t *testing.T) {
	path := writeFile(t, "plugin.yaml", `rule_name: spend
rule_items:
  - limit_by_per_header: x-api-key
    limit_keys:
      - key: "*"
        usd_per_day: 5
        per_model:
          - {model: claude-sonnet-4-5, usd_per_day: 1}
pricing:
  my-llama: {input: 0.2, output: 0.6}
redis:
  service_name: redis.static
`)
	status, out, errOut := atrl("", "check", "-config", path, "-model", "gpt-4o-2024-08-06", "-model", "us.anthropic.claude-3-5-sonnet-20240620-v1:0", "-model", "my-finetune")
	assert.Equal(t, exitOK, status, errOut)
	prices := []string{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if strings.HasPrefix(l, path+": price: ") {
			prices = append(prices, strings.TrimPrefix(l, path+": price: "))
		}
	}
	src := " (" + pricing.Source + ")"
	assert.Equal(t, []string{
		"claude-sonnet-4-5: $3 input, $15 output, $0.3 cache read, $3.75 cache write per million tokens; above 200000 input tokens, " +
			"$6 input, $22.5 output, $0.6 cache read, $7.5 cache write per million tokens (the catalog: anthropic's claude-sonnet-4-5" + src + ")",
		`my-llama: $0.2 input, $0.6 output, $0.2 cache read, $0.2 cache write per million tokens (pricing: "my-llama")`,
		"gpt-4o-2024-08-06: $2.5 input, $10 output, $1.25 cache read, $2.5 cache write per million tokens (the catalog: openai's gpt-4o" + src + ")",
		"us.anthropic.claude-3-5-sonnet-20240620-v1:0: $3 input, $15 output, $0.3 cache read, $3.75 cache write per million tokens " +
			"(the catalog: aws's regional.anthropic.claude-3-5-sonnet-20240620-v1:0" + src + ")",
		"my-finetune: " + pricing.Dearest("openai").String() + " (not listed: the dearest price of openai in the catalog" + src + ")",
	}, prices, out)
	assert.Contains(t, out, "note: pricing: models no pricing entry names are priced at their list price in the catalog")

	// Nothing priced: asked models say so.
	plain := writeFile(t, "plain.yaml", "rule_name: r\nrule_items:\n  - limit_by_per_header: x-api-key\n    limit_keys:\n      - {key: \"*\", token_per_minute: 5}\nredis:\n  service_name: redis.static\n")
	_, out, _ = atrl("", "check", "-config", plain, "-model", "gpt-4o")
	assert.Contains(t, out, plain+": price: gpt-4o: not priced: the configuration counts no money (usd_per_*) and has no pricing\n")
}

// Two rule items reading one header: a note each, the migration trap of
// first-match configurations (a key's exception in an item of its own
// before a catch-all) and two items of one type, which merge; none under
// rule_match_mode first.
func TestCheckNotesItemsReadingOneValue(t *testing.T) {
	config := `rule_name: keys
rule_items:
  - limit_by_header: x-api-key
    limit_keys:
      - {key: sk-premium-1, token_per_minute: 100000}
  - limit_by_per_header: x-api-key
    limit_keys:
      - {key: "*", token_per_minute: 10000}
  - limit_by_per_header: x-api-key
    limit_keys:
      - {key: "regexp:^sk-free-", token_per_day: 5000}
  - limit_by_per_ip: from-remote-addr
    limit_keys:
      - {key: 0.0.0.0/0, token_per_minute: 10000}
redis:
  service_name: redis.static
`
	path := writeFile(t, "plugin.yaml", config)
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Equal(t, exitOK, status, errOut)
	trap := " read the same value: every rule item that matches applies (as in Higress 2.2.4), so a request both match is limited by both; " +
		"to give a value limits of its own instead, make it a key of one item, before the keys that match any value, or set rule_match_mode: first"
	assert.Equal(t, lines(
		path+`: ok: rule "keys" limits limit_by_header x-api-key (1 key), limit_by_per_header x-api-key (1 key), `+
			`limit_by_per_header x-api-key (1 key), limit_by_per_ip from-remote-addr (1 key)`+redis,
		path+`: note: rule_items[0] (limit_by_header x-api-key) and rule_items[1] (limit_by_per_header x-api-key)`+trap,
		path+`: note: rule_items[0] (limit_by_header x-api-key) and rule_items[2] (limit_by_per_header x-api-key)`+trap,
		path+`: note: rule_items[1] (limit_by_per_header x-api-key) and rule_items[2] (limit_by_per_header x-api-key) name one subject `+
			`for a value both match: it is counted once, each window at the tighter limit of the two`,
	), out)

	path = writeFile(t, "first.yaml", "rule_match_mode: first\n"+config)
	status, out, _ = atrl("", "check", "-config", path)
	assert.Equal(t, exitOK, status)
	assert.NotContains(t, out, "note:")
}

// A fallback that has fallbacks of its own: a note (one step, never a chain).
func TestCheckShowsFallbacks(t *testing.T) {
	path := writeFile(t, "plugin.yaml", `rule_name: models
model_fallbacks:
  gpt-4o: [gpt-4o-mini]
  gpt-4o-mini: [gpt-3.5-turbo]
rule_items:
  - limit_by_per_consumer: ""
    limit_keys:
      - key: "*"
        token_per_day: 100000
        per_model:
          - {model: "*", token_per_minute: 1000}
redis:
  service_name: redis.static
`)
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(
		path+`: ok: rule "models" limits limit_by_per_consumer (1 key); when a model has no room, serves gpt-4o as gpt-4o-mini, `+
			`gpt-4o-mini as gpt-3.5-turbo`+redis,
		path+`: note: model_fallbacks.gpt-4o: "gpt-4o-mini" has fallbacks of its own (gpt-3.5-turbo), which a request falling back to it `+
			`does not try: a fallback is one step`,
	), out)
}

// redis ends each ok line of the test files: what the plugin will call.
const redis = "; Redis redis.static (may be a Redis Cluster, redis.timeout 1000 ms)"

// Issue 52, point 8: redis.cluster says what the plugin allows for (true:
// each call kept to one hash slot, which one server takes too), not that a
// Redis Cluster runs there: make run's one redis-server was called "a
// Redis Cluster".
func TestCheckSaysWhatRedisClusterMeans(t *testing.T) {
	for cluster, want := range map[string]string{"": "may be a Redis Cluster", "true": "may be a Redis Cluster", "false": "one Redis server"} {
		doc := "rule_name: r\nglobal_threshold:\n  token_per_day: 10\nredis:\n  service_name: redis.static\n"
		if cluster != "" {
			doc += "  cluster: " + cluster + "\n"
		}
		path := writeFile(t, "plugin.yaml", doc)
		status, out, errOut := atrl("", "check", "-config", path)
		require.Equal(t, exitOK, status, errOut)
		assert.Equal(t, path+`: ok: rule "r" limits every request (global_threshold); Redis redis.static (`+want+", redis.timeout 1000 ms)\n", out, "cluster: %q", cluster)
	}
}

// A refused configuration prints the plugin's line, where and what is
// wrong, and nothing of the wrapper's wording.
func TestCheckRefused(t *testing.T) {
	path := writeFile(t, "plugin.yaml", rulesYAML)
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, path+": configuration refused: _rules_[1].rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0\n"+
		"   25 |             token_per_minute: 0\n"+
		"      |             ^\n", errOut, "the plugin's line, then the field's in the file")

	// JSON, as the gateway hands it: a misspelled field at the top level.
	path = writeFile(t, "plugin.json", `{"rule_name": "x", "global_threshold": {"token_per_minuet": 10}, "redis": {"service_name": "redis.static"}}`)
	status, out, errOut = atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, path+": configuration refused: global_threshold.token_per_minuet: unknown field (did you mean token_per_minute?)\n"+
		`    1 | {"rule_name": "x", "global_threshold": {"token_per_minuet": 10}, "redis": {"service_name": "redis.st...`+"\n"+
		"      |                                         ^\n", errOut)

	// A rule that matches no request.
	path = writeFile(t, "rules.yaml", "_rules_:\n  - rule_name: x\n    global_threshold: {token_per_day: 1}\n    redis: {service_name: redis.static}\n")
	status, _, errOut = atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, path+": configuration refused: _rules_[0]: matches nothing: a rule needs _match_route_, _match_domain_, _match_service_ or _match_route_prefix_, a list of names\n"+
		"    2 |   - rule_name: x\n"+
		"      |     ^\n", errOut)
}

func TestCheckBadFiles(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing.yaml")
	notYAML := writeFile(t, "bad.yaml", "rule_name: [x\n")
	notJSON := writeFile(t, "bad.json", `{"rule_name": `)
	empty := writeFile(t, "empty.yaml", "")
	unreadable := filepath.Join(dir, "dir.yaml")
	require.NoError(t, os.Mkdir(unreadable, 0o755))
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"-config", missing}, missing + ": cannot be read: no such file or directory\n"},
		{[]string{"-config", unreadable}, unreadable + ": cannot be read: is a directory\n"},
		{[]string{"-config", notYAML}, notYAML + ": invalid YAML at line 1, column 12: sequence end token ']' not found\n"},
		{[]string{"-config", empty}, empty + ": the configuration is empty\n"},
		{[]string{"-config", notJSON}, notJSON + ": invalid JSON at line 1, column 14: the document ends before its last value does\n"},
		{nil, "atrl check: -config is required"},
		{[]string{"-config", notYAML, "extra"}, `atrl check: unexpected argument "extra"`},
		{[]string{"-confg", notYAML}, "flag provided but not defined: -confg"},
	} {
		status, out, errOut := atrl("", append([]string{"check"}, tc.args...)...)
		assert.Equal(t, exitBadArgs, status, tc.args)
		assert.Empty(t, out, tc.args)
		assert.True(t, strings.HasPrefix(errOut, tc.stderr), "%q: %s", tc.args, errOut)
	}
}

func TestCheckIsListed(t *testing.T) {
	_, out, _ := atrl("", "help")
	assert.Contains(t, out, "\tcheck    check a plugin configuration")
	status, out, _ := atrl("", "help", "check")
	assert.Equal(t, exitOK, status)
	assert.True(t, strings.HasPrefix(out, "usage: atrl check -config FILE [-model NAME]...\n"), out)
}

// The WasmPlugin manifest docs/deployment.md applies: each of its
// configurations is checked and named (issue 52: "apiVersion: unknown
// field").
func TestCheckTheShippedManifest(t *testing.T) {
	const manifest = "../../tools/deploy/wasmplugin.yaml"
	status, out, errOut := atrl("", "check", "-config", manifest)
	assert.Equal(t, exitOK, status, errOut)
	assert.Empty(t, errOut)
	cluster := "; Redis redis.default.svc.cluster.local (may be a Redis Cluster, redis.timeout 1000 ms)"
	assert.Equal(t, lines(
		manifest+`: defaultConfig: ok: rule "consumers" limits limit_by_per_consumer (2 keys)`+cluster,
		manifest+`: matchRules[0] (ingress default/llm-chat): ok: rule "llm-chat" limits limit_by_per_api_key (2 keys)`+cluster,
	), out)
}

// A manifest's configurations are each checked: one refused is said at
// its line of the manifest, under its name; the others are still checked.
func TestCheckAManifestConfigurationByConfiguration(t *testing.T) {
	path := writeFile(t, "wasmplugin.yaml", `apiVersion: v1
kind: Namespace
metadata: {name: higress-system}
---
apiVersion: extensions.higress.io/v1alpha1
kind: WasmPlugin
metadata: {name: ai-token-ratelimit, namespace: higress-system}
spec:
  defaultConfig:
    rule_name: everyone
    global_threshold: {token_per_day: 100000}
    redis: {service_name: redis.static}
  matchRules:
    - ingress: [default/chat]
      domain: [chat.example.com]
      config:
        rule_name: chat
        rule_items:
          - limit_by_per_header: x-api-key
            limit_keys:
              - key: "*"
                token_per_minuet: 100
        redis: {service_name: redis.static}
`)
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Equal(t, path+`: defaultConfig: ok: rule "everyone" limits every request (global_threshold)`+redis+"\n", out)
	assert.Equal(t, path+": matchRules[0] (ingress default/chat; domain chat.example.com): configuration refused: "+
		"rule_items[0].limit_keys[0].token_per_minuet: unknown field (did you mean token_per_minute?)\n"+
		"   22 |                 token_per_minuet: 100\n"+
		"      |                 ^\n", errOut)
}

// Issue 52: a YAML indentation mistake on line 6 was said to be on line 4
// (gopkg.in/yaml.v3 named the enclosing block), and a JSON one had no
// place. Each is said at its line and column, the line shown, in the
// words make run's local gateway prints too (tools/localgw).
func TestCheckSaysWhereTheSyntaxErrorIs(t *testing.T) {
	indented, err := os.ReadFile("../../internal/configfile/testdata/indented.yaml") // line 6 one space short
	require.NoError(t, err)
	path := writeFile(t, "plugin.yaml", string(indented))
	status, out, errOut := atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, path+": invalid YAML at line 6, column 8: value is not allowed in this context\n"+
		"    6 |        token_per_minute: 100\n"+
		"      |        ^\n", errOut)

	path = writeFile(t, "plugin.json", `{
  "rule_name": "demo",
  "global_threshold": {"token_per_minute": 100},
  "redis": {"service_name": "redis.static",},
}
`)
	status, out, errOut = atrl("", "check", "-config", path)
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, path+": invalid JSON at line 4, column 43: a comma after the last member of an object (JSON allows none)\n"+
		`    4 |   "redis": {"service_name": "redis.static",},`+"\n"+
		"      |                                           ^\n", errOut)
}
