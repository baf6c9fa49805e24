package deploy

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// docs/deployment.md (step 3) lists what an operator edits in
// wasmplugin.yaml and sends them to the file "where it says EDIT": each of
// those places carries an EDIT comment just above it.
func TestWasmPluginMarksEachEdit(t *testing.T) {
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, "tools/deploy/wasmplugin.yaml"), &doc))
	require.NotEmpty(t, doc.Content)
	root := doc.Content[0]

	spec := mappingValue(t, root, "spec")
	marked := func(where string, comment string) {
		t.Helper()
		require.Contains(t, comment, "# EDIT", "wasmplugin.yaml %s: no EDIT comment above it", where)
	}
	marked("spec.url", mappingKey(t, spec, "url").HeadComment)
	marked("spec.vmConfig", mappingKey(t, spec, "vmConfig").HeadComment)
	marked("spec.defaultConfig", mappingKey(t, spec, "defaultConfig").HeadComment)
	marked("spec.defaultConfig.redis", mappingKey(t, mappingValue(t, spec, "defaultConfig"), "redis").HeadComment)

	// imagePullSecret is commented out in the example: the EDIT comment
	// above it names it.
	pullSecret := false
	for i := 0; i+1 < len(spec.Content); i += 2 {
		k := spec.Content[i]
		if k.Value == "imagePullSecret" {
			marked("spec.imagePullSecret", k.HeadComment)
			pullSecret = true
		}
		if c := k.HeadComment; strings.Contains(c, "# EDIT") && strings.Contains(c, "imagePullSecret:") {
			pullSecret = true
		}
	}
	require.True(t, pullSecret, "wasmplugin.yaml: no EDIT comment for spec.imagePullSecret")

	rules := mappingValue(t, spec, "matchRules")
	require.NotEmpty(t, rules.Content)
	for _, r := range rules.Content {
		where := "spec.matchRules entry at line " + strconv.Itoa(r.Line)
		marked(where, r.HeadComment+mappingKey(t, r, r.Content[0].Value).HeadComment)
		if disabled := mappingValueOrNil(r, "configDisable"); disabled != nil && disabled.Value == "true" {
			continue
		}
		marked(where+": config.redis", mappingKey(t, mappingValue(t, r, "config"), "redis").HeadComment)
	}
}

// mappingKey returns the key node of a mapping's entry.
func mappingKey(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	require.Equal(t, yaml.MappingNode, m.Kind, "line %d: not a mapping", m.Line)
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	t.Fatalf("line %d: no %s", m.Line, key)
	return nil
}

// mappingValue returns the value node of a mapping's entry.
func mappingValue(t *testing.T, m *yaml.Node, key string) *yaml.Node {
	t.Helper()
	v := mappingValueOrNil(m, key)
	require.NotNil(t, v, "line %d: no %s", m.Line, key)
	return v
}

func mappingValueOrNil(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}
