package deploy

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// wasmPlugin is the part of Higress's WasmPlugin resource
// (extensions.higress.io/v1alpha1) that the example uses.
type wasmPlugin struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		URL             string         `yaml:"url"`
		ImagePullPolicy string         `yaml:"imagePullPolicy"`
		Phase           string         `yaml:"phase"`
		Priority        *int           `yaml:"priority"`
		DefaultConfig   map[string]any `yaml:"defaultConfig"`
		MatchRules      []struct {
			Ingress       []string       `yaml:"ingress"`
			Domain        []string       `yaml:"domain"`
			Service       []string       `yaml:"service"`
			Config        map[string]any `yaml:"config"`
			ConfigDisable bool           `yaml:"configDisable"`
		} `yaml:"matchRules"`
	} `yaml:"spec"`
}

func loadWasmPlugin(t *testing.T) wasmPlugin {
	t.Helper()
	var wp wasmPlugin
	dec := yaml.NewDecoder(strings.NewReader(string(readRepoFile(t, "tools/deploy/wasmplugin.yaml"))))
	dec.KnownFields(true) // a misspelt field of the example fails here
	require.NoError(t, dec.Decode(&wp), "tools/deploy/wasmplugin.yaml")
	return wp
}

func TestWasmPluginResource(t *testing.T) {
	wp := loadWasmPlugin(t)
	require.Equal(t, "extensions.higress.io/v1alpha1", wp.APIVersion)
	require.Equal(t, "WasmPlugin", wp.Kind)
	require.NotEmpty(t, wp.Metadata.Name)
	require.Equal(t, "higress-system", wp.Metadata.Namespace, "Higress reads WasmPlugins of its own namespace")

	require.Regexp(t, `^oci://[^/\s]+(/[^/\s]+)*/ai-token-ratelimit:\d+\.\d+\.\d+$`, wp.Spec.URL)
	require.Contains(t, []string{"", "UNSPECIFIED_POLICY", "IfNotPresent", "Always"}, wp.Spec.ImagePullPolicy)
	// As Higress's own ai-token-ratelimit: default phase, priority 600.
	require.Equal(t, "UNSPECIFIED_PHASE", wp.Spec.Phase)
	require.NotNil(t, wp.Spec.Priority)
	require.Equal(t, 600, *wp.Spec.Priority)
}

// Each configuration of the example is accepted by the plugin, as Higress
// hands it over: the YAML converted to JSON.
func TestWasmPluginConfigsParse(t *testing.T) {
	wp := loadWasmPlugin(t)
	require.NotEmpty(t, wp.Spec.DefaultConfig, "defaultConfig")
	cfg, err := config.ParseString(toJSON(t, wp.Spec.DefaultConfig))
	require.NoError(t, err, "defaultConfig")
	require.NotEmpty(t, cfg.Items)
	require.Equal(t, config.ByPerConsumer, cfg.Items[0].Type, "the default limits per consumer")

	require.NotEmpty(t, wp.Spec.MatchRules, "matchRules")
	for i, r := range wp.Spec.MatchRules {
		require.NotEmpty(t, append(append(r.Ingress, r.Domain...), r.Service...), "matchRules[%d] matches nothing", i)
		for _, ing := range r.Ingress {
			require.Regexp(t, `^[a-z0-9-]+/[a-z0-9.-]+$`, ing, "matchRules[%d].ingress is <namespace>/<name>", i)
		}
		if r.ConfigDisable {
			continue
		}
		_, err := config.ParseString(toJSON(t, r.Config))
		require.NoError(t, err, "matchRules[%d].config", i)
	}
}
