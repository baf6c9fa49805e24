package deploy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
)

// wasmPlugin is the part of Higress's WasmPlugin resource
// (extensions.higress.io/v1alpha1) that the example uses, but the plugin's
// configurations (spec.defaultConfig, spec.matchRules[].config), which
// wasmPluginConfigs reads.
type wasmPlugin struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		URL             string                `yaml:"url"`
		ImagePullPolicy string                `yaml:"imagePullPolicy"`
		Phase           string                `yaml:"phase"`
		Priority        *int                  `yaml:"priority"`
		VMConfig        wasmVMConfig          `yaml:"vmConfig"`
		DefaultConfig   readThroughConfigfile `yaml:"defaultConfig"`
		MatchRules      []struct {
			Ingress       []string              `yaml:"ingress"`
			Domain        []string              `yaml:"domain"`
			Service       []string              `yaml:"service"`
			Config        readThroughConfigfile `yaml:"config"`
			ConfigDisable bool                  `yaml:"configDisable"`
		} `yaml:"matchRules"`
	} `yaml:"spec"`
}

// readThroughConfigfile is a plugin configuration in the manifest: not
// decoded here (any content is accepted), since the tests read it through
// internal/configfile, as atrl and make run do (wasmPluginConfigs).
type readThroughConfigfile struct{}

func (*readThroughConfigfile) UnmarshalYAML(*yaml.Node) error { return nil }

// wasmVMConfig is a WasmPlugin's vmConfig, which Higress hands to Istio's
// WasmPlugin and so to Envoy's vm_config.environment_variables.
type wasmVMConfig struct {
	Env []wasmEnvVar `yaml:"env"`
}

// wasmEnvVar is an entry of a WasmPlugin's vmConfig.env: an environment
// variable of the plugin's VM, set to value (valueFrom INLINE, the default)
// or copied from the gateway's own environment (valueFrom HOST).
type wasmEnvVar struct {
	Name      string `yaml:"name"`
	ValueFrom string `yaml:"valueFrom"`
	Value     string `yaml:"value"`
}

func loadWasmPlugin(t *testing.T) wasmPlugin {
	t.Helper()
	var wp wasmPlugin
	dec := yaml.NewDecoder(strings.NewReader(string(readRepoFile(t, "tools/deploy/wasmplugin.yaml"))))
	dec.KnownFields(true) // a misspelt field of the example fails here
	require.NoError(t, dec.Decode(&wp), "tools/deploy/wasmplugin.yaml")
	return wp
}

// wasmPluginConfigs are the plugin configurations of wasmplugin.yaml, read
// by internal/configfile, as atrl check and make run read the file:
// defaultConfig, then each matchRules config but those disabled, each the
// JSON Higress hands the plugin.
func wasmPluginConfigs(t *testing.T) []configfile.Config {
	t.Helper()
	const name = "tools/deploy/wasmplugin.yaml"
	configs, err := configfile.Read(name, readRepoFile(t, name))
	require.NoError(t, err)
	return configs
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

// Each configuration of the example is accepted by the plugin, as atrl
// check takes it (config.ParseDocument of the JSON Higress hands over):
// defaultConfig and each matchRules config, found where Higress finds them.
func TestWasmPluginConfigsParse(t *testing.T) {
	wp := loadWasmPlugin(t)
	want := []string{"defaultConfig"}
	require.NotEmpty(t, wp.Spec.MatchRules, "matchRules")
	for i, r := range wp.Spec.MatchRules {
		require.NotEmpty(t, append(append(r.Ingress, r.Domain...), r.Service...), "matchRules[%d] matches nothing", i)
		for _, ing := range r.Ingress {
			require.Regexp(t, `^[a-z0-9-]+/[a-z0-9.-]+$`, ing, "matchRules[%d].ingress is <namespace>/<name>", i)
		}
		if !r.ConfigDisable {
			want = append(want, fmt.Sprintf("matchRules[%d]", i))
		}
	}

	configs := wasmPluginConfigs(t)
	var got []string
	for _, c := range configs {
		got = append(got, strings.SplitN(c.Name, " ", 2)[0]) // "matchRules[0] (ingress default/llm-chat)"
	}
	require.Equal(t, want, got, "the configurations configfile reads")
	for i, c := range configs {
		d, err := config.ParseDocument(c.JSON)
		if err != nil {
			t.Fatalf("the plugin refuses it, as atrl check says:\n%s", c.Refused(err))
		}
		require.NotNil(t, d.Global, "%s: a configuration of its own, not only _rules_", c.Where())
		if i == 0 {
			require.NotEmpty(t, d.Global.Items, c.Where())
			require.Equal(t, config.ByPerConsumer, d.Global.Items[0].Type, "the default limits per consumer")
		}
	}
}

// No configuration of the example holds a Redis password: anyone who can read
// WasmPlugins (and the gateway's xDS) would read it. Each names instead the
// VM environment variable it is in, which the WasmPlugin takes from the
// gateway's environment (valueFrom: HOST), where a Secret puts it.
func TestWasmPluginKeepsTheRedisPasswordOutOfTheFile(t *testing.T) {
	wp := loadWasmPlugin(t)
	fromHost := map[string]bool{}
	for _, e := range wp.Spec.VMConfig.Env {
		require.Regexp(t, `^[A-Za-z_][A-Za-z0-9_]*$`, e.Name, "vmConfig.env names are C identifiers")
		require.Contains(t, []string{"", "INLINE", "HOST"}, e.ValueFrom, "vmConfig.env[%s].valueFrom", e.Name)
		if e.ValueFrom == "HOST" {
			require.Empty(t, e.Value, "vmConfig.env[%s]: a HOST variable takes its value from the gateway, value is ignored", e.Name)
			fromHost[e.Name] = true
		}
	}

	for _, c := range wasmPluginConfigs(t) {
		where := c.Where()
		redis := gjson.GetBytes(c.JSON, "redis")
		require.True(t, redis.IsObject(), "%s has no redis object", where)
		plain := redis.Get("password").Exists() // not printed: it may be a real one
		require.False(t, plain, "%s: redis.password puts the Redis password in the WasmPlugin: use password_env", where)
		env := redis.Get("password_env")
		require.Equal(t, gjson.String, env.Type, "%s: redis.password_env", where)
		require.NotEmpty(t, env.Str, "%s: redis.password_env", where)
		require.True(t, fromHost[env.Str], "%s: redis.password_env is %s, which vmConfig.env does not take from the gateway (valueFrom: HOST)", where, env.Str)
	}
}
