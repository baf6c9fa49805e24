package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
)

func TestRequiredFlagsAreNamed(t *testing.T) {
	assert.ErrorContains(t, options{upstream: "http://llm.invalid:8081"}.check(), "-config is required")
	assert.ErrorContains(t, options{config: "c.yaml"}.check(), "-upstream is required")
	assert.NoError(t, options{config: "c.yaml", upstream: "http://llm.invalid:8081"}.check())
}

func TestStartErrorsSayWhatToDo(t *testing.T) {
	dir := t.TempDir()
	base := options{upstream: "http://127.0.0.1:9", redis: "127.0.0.1:9", listen: "127.0.0.1:0", logLevel: "info",
		config: "example.yaml", wasm: filepath.Join(dir, "main.wasm")}

	err := run(base)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "does not exist: build it with `make build`")

	notWasm := filepath.Join(dir, "not.wasm")
	require.NoError(t, os.WriteFile(notWasm, []byte("not a module"), 0o644))
	o := base
	o.wasm, o.config = notWasm, filepath.Join(dir, "missing.yaml")
	assert.EqualError(t, run(o), o.config+": cannot be read: no such file or directory")

	o.config = "example.yaml"
	assert.ErrorContains(t, run(o), "loading the plugin")
}

func TestTheExampleConfigurationLoads(t *testing.T) {
	configs, err := configfile.Load("example.yaml")
	require.NoError(t, err)
	require.Len(t, configs, 1)
	_, err = config.ParseDocument(configs[0].JSON)
	require.NoError(t, err)
	assert.Contains(t, string(configs[0].JSON), `"limit_by_per_api_key":""`)
}

// Issue 52: a configuration's mistake is said at its line and column,
// the line shown, in the words atrl check prints (cmd/atrl's
// TestCheckSaysWhereTheSyntaxErrorIs has the same lines; TestRunStopsOnABadConfiguration
// compares the two programs): before, "not valid YAML: yaml: line 4: did
// not find expected '-' indicator" for a mistake on line 6, and "not valid
// JSON: invalid character '}' looking for beginning of object key string".
func TestConfigurationMistakesAreSaidWhereTheyAre(t *testing.T) {
	dir := t.TempDir()
	notWasm := filepath.Join(dir, "not.wasm")
	require.NoError(t, os.WriteFile(notWasm, []byte("not a module"), 0o644)) // the configuration is read first
	o := options{upstream: "http://127.0.0.1:9", redis: "127.0.0.1:9", listen: "127.0.0.1:0", logLevel: "info", wasm: notWasm}
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		return path
	}

	o.config = write("indented.yaml", indentedYAML)
	err := run(o)
	var bad *badConfig
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, o.config+": invalid YAML at line 6, column 8: value is not allowed in this context\n"+
		"    6 |        token_per_minute: 100\n"+
		"      |        ^", err.Error())

	o.config = write("comma.json", trailingCommaJSON)
	err = run(o)
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, o.config+": invalid JSON at line 4, column 43: a comma after the last member of an object (JSON allows none)\n"+
		`    4 |   "redis": {"service_name": "redis.static",},`+"\n"+
		"      |                                           ^", err.Error())

	// A field the plugin refuses: its line, in a WasmPlugin manifest too.
	o.config = write("refused.yaml", strings.Replace(indentedYAML, "       token_per_minute: 100", "        token_per_minute: 0", 1))
	err = run(o)
	require.ErrorAs(t, err, &bad)
	assert.Equal(t, o.config+": configuration refused: rule_items[0].limit_keys[0].token_per_minute: must be a positive integer, got number 0\n"+
		"    6 |         token_per_minute: 0\n"+
		"      |         ^", err.Error())
	manifest, err := os.ReadFile("../deploy/wasmplugin.yaml")
	require.NoError(t, err)
	o.config = write("wasmplugin.yaml", strings.Replace(string(manifest), "token_per_hour: 100000", "token_per_hour: -1", 1))
	err = run(o)
	require.ErrorAs(t, err, &bad)
	assert.Regexp(t, `^`+regexp.QuoteMeta(o.config+": matchRules[0] (ingress default/llm-chat): configuration refused: "+
		"rule_items[0].limit_keys[1].token_per_hour: must be a positive integer, got number -1\n")+
		` +\d+ \|                 token_per_hour: -1\n +\|                 \^$`, err.Error())

	// The shipped manifest is taken: its first configuration runs (here
	// the plugin, not a module, fails to load next).
	o.config = "../deploy/wasmplugin.yaml"
	assert.ErrorContains(t, run(o), "loading the plugin")
}

// indentedYAML is a configuration whose line 6 is indented one space short of the
// key it belongs with (gopkg.in/yaml.v3 said "line 4"): the mistake
// internal/configfile, atrl and make run each say at line 6.
var indentedYAML = func() string {
	b, err := os.ReadFile("../../internal/configfile/testdata/indented.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// trailingCommaJSON has a comma after the last member on line 4.
const trailingCommaJSON = `{
  "rule_name": "demo",
  "global_threshold": {"token_per_minute": 100},
  "redis": {"service_name": "redis.static",},
}
`
