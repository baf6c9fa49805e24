package configfile

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// indented is a configuration whose line 6 is indented one space short of the
// key it belongs with (gopkg.in/yaml.v3 said "line 4"): the mistake
// internal/configfile, atrl and make run each say at line 6.
var indented = func() string {
	b, err := os.ReadFile("testdata/indented.yaml")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// indentedError is what atrl and make run print for indented.
const indentedError = `: invalid YAML at line 6, column 8: value is not allowed in this context
    6 |        token_per_minute: 100
      |        ^`

// trailingComma is JSON with a comma after the last member on line 4.
const trailingComma = `{
  "rule_name": "demo",
  "global_threshold": {"token_per_minute": 100},
  "redis": {"service_name": "redis.static",},
}
`

const trailingCommaError = `: invalid JSON at line 4, column 43: a comma after the last member of an object (JSON allows none)
    4 |   "redis": {"service_name": "redis.static",},
      |                                           ^`

func write(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func TestSyntaxErrorsAtTheirLineAndColumn(t *testing.T) {
	path := write(t, "plugin.yaml", indented)
	_, err := Load(path)
	assert.EqualError(t, err, path+indentedError)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, [2]int{6, 8}, [2]int{e.Line, e.Column})

	path = write(t, "plugin.json", trailingComma)
	_, err = Load(path)
	assert.EqualError(t, err, path+trailingCommaError)
	assert.Contains(t, err.Error(), config.CheckJSON([]byte(trailingComma)).Error(), "the plugin's words")

	// goccy's other places are the file's, in words.
	_, err = Read("dup.yaml", []byte("# a comment\n---\nrule_name: a\nrule_name: b\n"))
	assert.EqualError(t, err, `dup.yaml: invalid YAML at line 4, column 1: mapping key "rule_name" already defined at line 3, column 1
    4 | rule_name: b
      | ^`)
	_, err = Read("flow.yaml", []byte("rule_name: [x\n"))
	assert.ErrorContains(t, err, "flow.yaml: invalid YAML at line 1, column 12: ")
}

func TestAPlainConfiguration(t *testing.T) {
	cs, err := Read("plugin.yaml", []byte(`
rule_name: demo
rule_items:
  - limit_by_per_consumer: ''
    limit_keys:
      - key: "*"
        token_per_minute: 100
      - key: 12345
        token_per_hour: 10
weights: {1: a, true: b, ~: c}
rejected_msg: "<b>slow down</b>"
redis: &r
  service_name: redis.static
  timeout: 250
other: *r
`))
	require.NoError(t, err)
	require.Len(t, cs, 1)
	assert.Equal(t, "", cs[0].Name)
	assert.Equal(t, "plugin.yaml", cs[0].Where())
	assert.Equal(t, `{"rule_name":"demo","rule_items":[{"limit_by_per_consumer":"","limit_keys":[{"key":"*","token_per_minute":100},`+
		`{"key":12345,"token_per_hour":10}]}],"weights":{"1":"a","true":"b","null":"c"},"rejected_msg":"<b>slow down</b>",`+
		`"redis":{"service_name":"redis.static","timeout":250},"other":{"service_name":"redis.static","timeout":250}}`, string(cs[0].JSON),
		"the file's order, keys as text, aliases resolved")

	// A .json file is handed over as it is.
	doc := "{\"rule_name\": \"j\",\n \"b\": 1, \"a\": 2}"
	cs, err = Read("c.JSON", []byte(doc))
	require.NoError(t, err)
	assert.Equal(t, doc, string(cs[0].JSON))

	// A document marker first, and empty documents, are no configurations.
	cs, err = Read("c.yaml", []byte("---\n# nothing\n---\nrule_name: y\n"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"rule_name":"y"}`, string(cs[0].JSON))
}

func TestWhatIsNoConfiguration(t *testing.T) {
	for _, tc := range []struct{ name, doc, msg string }{
		{"e.yaml", "", "e.yaml: the configuration is empty"},
		{"e.yaml", "# only a comment\n---\n", "e.yaml: the configuration is empty"},
		{"e.json", " \n", "e.json: invalid JSON at line 1, column 1: the document is empty"},
		{"l.yaml", "- a\n- b\n", "l.yaml: the configuration must be a mapping of fields (rule_name, rule_items…), not a list\n    1 | - a\n      | ^"},
		{"s.yaml", "just text\n", "s.yaml: the configuration must be a mapping of fields (rule_name, rule_items…), not a string \"just text\"\n    1 | just text\n      | ^"},
		{"two.yaml", "rule_name: a\n---\nrule_name: b\n", "two.yaml: 2 YAML documents, and none is a WasmPlugin (extensions.higress.io/WasmPlugin): a configuration is one document\n" +
			"    3 | rule_name: b\n      | ^"},
		{"inf.yaml", "rule_name: a\nglobal_threshold:\n  token_per_minute: .inf\n",
			"inf.yaml: global_threshold.token_per_minute: +Inf is no JSON number (JSON numbers are finite)\n    3 |   token_per_minute: .inf\n      |   ^"},
		{"cm.yaml", "apiVersion: v1\nkind: ConfigMap\n", "cm.yaml: a manifest without a WasmPlugin (extensions.higress.io/v1alpha1, kind WasmPlugin)"},
		{"mixed.yaml", "apiVersion: v1\nkind: ConfigMap\n---\nrule_name: a\n",
			"mixed.yaml: a YAML document without apiVersion and kind, in a manifest: every document must be a Kubernetes object\n    4 | rule_name: a\n      | ^"},
	} {
		_, err := Read(tc.name, []byte(tc.doc))
		assert.EqualError(t, err, tc.msg, "%q", tc.doc)
	}
}

// Aliases of aliases (a "billion laughs") are refused before they are
// expanded: goccy/go-yaml would expand them for minutes.
func TestAliasesThatExpandTooFar(t *testing.T) {
	doc := "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n"
	for i := 1; i <= 8; i++ {
		doc += fmt.Sprintf("a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	start := time.Now()
	_, err := Read("laughs.yaml", []byte(doc))
	assert.EqualError(t, err, "laughs.yaml: its aliases expand it past 1048576 values: not a configuration\n"+
		"    1 | a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n      | ^")
	assert.Less(t, time.Since(start), time.Second)

	// Nor are lists in lists in lists: goccy/go-yaml takes time and memory
	// quadratic in the depth.
	start = time.Now()
	_, err = Read("deep.yaml", []byte("a: "+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+"\n"))
	assert.ErrorContains(t, err, "deep.yaml: nests lists and mappings deeper than 1000 levels: not a configuration\n    1 | ...[[[")
	deep := "{\"a\": " + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + "}"
	cs, err := Read("deep.json", []byte(deep))
	require.NoError(t, err, "JSON: handed to the plugin, which refuses it")
	assert.Equal(t, "deep.json: configuration refused: a: unknown field", cs[0].Refused(&config.FieldError{Path: "a", Msg: "unknown field"}).Error(),
		"no place: the tree is not read")
	assert.Less(t, time.Since(start), time.Second)

	// A few levels are a configuration's business.
	_, err = Read("ok.yaml", []byte(strings.Join(strings.Split(doc, "\n")[:5], "\n")))
	assert.NoError(t, err)
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Load(filepath.Join(dir, "missing.yaml"))
	assert.EqualError(t, err, filepath.Join(dir, "missing.yaml")+": cannot be read: no such file or directory")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	_, err = Load(dir)
	assert.ErrorContains(t, err, dir+": cannot be read: ")

	big := filepath.Join(dir, "big.yaml")
	require.NoError(t, os.WriteFile(big, nil, 0o644))
	require.NoError(t, os.Truncate(big, MaxFileBytes+1))
	_, err = Load(big)
	assert.EqualError(t, err, big+": larger than 16 MiB: not a configuration")
}

// The shipped WasmPlugin: its defaultConfig and its match rule's config,
// each named, each as the gateway hands it to the plugin, which takes it.
func TestTheShippedManifest(t *testing.T) {
	cs, err := Load("../../tools/deploy/wasmplugin.yaml")
	require.NoError(t, err)
	var names []string
	for _, c := range cs {
		names = append(names, c.Where())
		_, err := config.ParseDocument(c.JSON)
		assert.NoError(t, err, c.Name)
	}
	assert.Equal(t, []string{"../../tools/deploy/wasmplugin.yaml: defaultConfig",
		"../../tools/deploy/wasmplugin.yaml: matchRules[0] (ingress default/llm-chat)"}, names)
	assert.Contains(t, string(cs[0].JSON), `"rule_name":"consumers"`)
	assert.Contains(t, string(cs[1].JSON), `"rule_name":"llm-chat"`)
}

// manifest is a file of several documents, as kubectl takes it: other
// kinds, empty documents, and two WasmPlugins.
const manifest = `---
apiVersion: v1
kind: Namespace
metadata: {name: higress-system}
---
---
# Source: chart/templates/wasmplugin.yaml
apiVersion: extensions.higress.io/v1alpha1
kind: WasmPlugin
metadata:
  name: limits
spec:
  defaultConfigDisable: true
  defaultConfig:
    rule_name: off-everywhere
  matchRules:
    - domain: ["*.example.com", api.example.org]
      service: [llm.default.svc.cluster.local]
      config:
        rule_name: by-domain
        global_threshold: {token_per_minute: 10}
        redis: {service_name: redis.static}
    - ingress: [default/off]
      configDisable: true
    - ingress: [default/empty]
...
---
apiVersion: extensions.higress.io/v1alpha1
kind: WasmPlugin
metadata: {name: second}
spec:
  defaultConfig:
    rule_name: second
    global_threshold:
      token_per_minute: 0
    redis: {service_name: redis.static}
`

func TestAManifestOfSeveralDocuments(t *testing.T) {
	cs, err := Read("m.yaml", []byte(manifest))
	require.NoError(t, err)
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	assert.Equal(t, []string{
		"WasmPlugin limits: matchRules[0] (domain *.example.com, api.example.org; service llm.default.svc.cluster.local)",
		"WasmPlugin limits: matchRules[2] (ingress default/empty)",
		"WasmPlugin second: defaultConfig",
	}, names, "defaultConfigDisable and configDisable: not run, not read")

	_, err = config.ParseDocument(cs[0].JSON)
	require.NoError(t, err)
	_, err = config.ParseDocument(cs[1].JSON)
	assert.EqualError(t, cs[1].Refused(err), "m.yaml: WasmPlugin limits: matchRules[2] (ingress default/empty): configuration refused: rule_name: required\n"+
		"   25 |     - ingress: [default/empty]\n      |       ^", "an empty configuration, at its rule")
	_, err = config.ParseDocument(cs[2].JSON)
	assert.EqualError(t, cs[2].Refused(err), "m.yaml: WasmPlugin second: defaultConfig: configuration refused: global_threshold.token_per_minute: must be a positive integer, got number 0\n"+
		"   35 |       token_per_minute: 0\n      |       ^")

	_, err = Read("svc.yaml", []byte("apiVersion: v1\nkind: Service\n---\napiVersion: apps/v1\nkind: Deployment\n"))
	assert.ErrorIs(t, err, ErrNoPlugin, "a manifest of other things")
	_, err = Read("m.yaml", []byte("apiVersion: extensions.higress.io/v1alpha1\nkind: WasmPlugin\nspec:\n  url: oci://x\n"))
	assert.EqualError(t, err, "m.yaml: the WasmPlugin has no configuration: no spec.defaultConfig, and no spec.matchRules[].config\n    3 | spec:\n      | ^")
	_, err = Read("m.yaml", []byte("apiVersion: extensions.higress.io/v1alpha1\nkind: WasmPlugin\nspec:\n  matchRules:\n    - ingress: [a/b]\n      config: [1]\n"))
	assert.EqualError(t, err, "m.yaml: matchRules[0] (ingress a/b): the configuration must be a mapping of fields (rule_name, rule_items…), not a list\n"+
		"    6 |       config: [1]\n      |       ^")
}

// A field the plugin refuses is shown at its line in the file, or, when
// the file has not got it (a required field), at the nearest enclosing one.
func TestRefusedFieldsAtTheirLine(t *testing.T) {
	indented := strings.Replace(indented, "       token_per_minute", "        token_per_minute", 1)
	for _, tc := range []struct{ name, doc, path, line string }{
		{"c.yaml", indented, "rule_items[0].limit_keys[0].key", `      - key: "*"`},
		{"c.yaml", indented, "rule_items[0].limit_keys[0].token_per_minute", `        token_per_minute: 100`},
		{"c.yaml", indented, "rule_items[0]", `  - limit_by_per_api_key: ''`},
		{"c.yaml", indented, "redis.service_name", `  service_name: redis.static`},
		{"c.yaml", indented, "rule_items[7].limit_keys", `rule_items:`},
		{"c.yaml", indented, "", `rule_name: demo`},
		{"c.yaml", "rule_name: x\nmodel_weights:\n  \"gpt-4.1\": 2\n", `model_weights."gpt-4.1"`, `  "gpt-4.1": 2`},
		{"c.yaml", "rule_name: x\nmodel_weights:\n  \"gpt-4.1\": 2\n", `model_weights."gpt-4.1"...`, `  "gpt-4.1": 2`},
		{"c.yaml", "rule_name: x\nrule_items: &i\n  - {limit_by_header: a}\n", `rule_items[0].limit_by_header`, `  - {limit_by_header: a}`},
		{"c.json", trailingCommaForField, "redis.service_name", `  "redis": {"service_name": 7}`},
		{"c.json", "[1,\n 2]", "x.y", `[1,`},
	} {
		cs, err := Read(tc.name, []byte(tc.doc))
		require.NoError(t, err, tc.doc)
		e := cs[0].Refused(&config.FieldError{Path: tc.path, Msg: "bad"})
		assert.Equal(t, tc.line, e.Text, tc.path)
		assert.True(t, strings.HasPrefix(e.Error(), tc.name+": configuration refused: "), e.Error())
	}
	// An error that is no FieldError: the file, and no place.
	cs, err := Read("c.yaml", []byte(indented[:strings.Index(indented, "\n")+1]))
	require.NoError(t, err)
	e := cs[0].Refused(assertError("no"))
	assert.Equal(t, "c.yaml: configuration refused: no", e.Error())
}

const trailingCommaForField = "{\"rule_name\": \"x\",\n  \"redis\": {\"service_name\": 7}\n}"

type assertError string

func (e assertError) Error() string { return string(e) }

func TestParsePath(t *testing.T) {
	for p, want := range map[string]string{
		"": "",
		"rule_items[0].limit_keys[12].token_per_minute": "rule_items[0].limit_keys[12].token_per_minute",
		`model_weights."gpt-4.1"`:                       `model_weights."gpt-4.1"`,
		`"a b"[2]."c\"d".e`:                             `"a b"[2]."c\"d".e`,
		`_rules_[1].x`:                                  `_rules_[1].x`,
		`a."long"...`:                                   `a.long`,
		`a[x]`:                                          `a`,
		`a[-1]`:                                         `a`,
		`a..b`:                                          `a`,
		`a.`:                                            `a`,
		`"unterminated`:                                 ``,
		`a"b`:                                           `"a\"b"`,
	} {
		assert.Equal(t, want, pathString(parsePath(p)), p)
	}
}

func TestExcerpt(t *testing.T) {
	e := &Error{File: "f", Msg: "m", Line: 12, Column: 3, Text: "\tx\x1by\r"}
	assert.Equal(t, "f: m\n   12 | \tx?y\n      | \t ^", e.Error(), "tabs kept, control characters shown as ?")
	long := strings.Repeat("a", 150) + "X" + strings.Repeat("b", 150)
	e = &Error{File: "f", Msg: "m", Line: 1, Column: 151, Text: long}
	lines := strings.Split(e.Error(), "\n")
	require.Len(t, lines, 3)
	assert.Equal(t, "    1 | ..."+strings.Repeat("a", 60)+"X"+strings.Repeat("b", 39)+"...", lines[1])
	assert.Equal(t, "      | "+strings.Repeat(" ", 63)+"^", lines[2])
	e = &Error{File: "f", Msg: "m", Line: 100000, Column: 99, Text: "ab"}
	assert.Equal(t, "f: m\n100000 | ab\n       |   ^", e.Error(), "a column past the end: after the line")
}

// The YAML reader is the tools': the plugin, which reads JSON from the
// gateway, does not link it (nor this package). Nor does it link the
// Prometheus client of atrl exporter, which the main go.mod lists: the
// gateway exports the plugin's counters itself.
func TestThePluginDoesNotLinkTheYAMLReader(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "github.com/tokenlimit/ai-token-ratelimit")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
	out, err := cmd.Output()
	require.NoError(t, err)
	deps := string(out)
	require.Contains(t, deps, "github.com/tokenlimit/ai-token-ratelimit/config\n", "the plugin's dependencies")
	assert.NotContains(t, deps, "yaml")
	assert.NotContains(t, deps, "configfile")
	assert.NotContains(t, deps, "prometheus")
}
