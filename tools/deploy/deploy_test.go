package deploy

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

// Paths shared by the files under test: they must agree with each other.
const (
	envoyConfigPath = "/etc/envoy/envoy.yaml" // where compose mounts envoy.yaml
	pluginWasmPath  = "/etc/envoy/main.wasm"  // where compose mounts main.wasm; envoy.yaml loads it
	listenerPort    = 10000
	mockLLMService  = "mockllm"
	mockLLMPort     = 8080
	redisService    = "redis"
	redisPort       = 6379
)

// repoRoot is the repository's root, the plugin's module: tests run in
// tools/deploy/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(root, "main.go"))
	require.NoError(t, err, "tools/deploy/ must sit two levels under the plugin's root")
	return root
}

func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	require.NoError(t, err)
	return b
}

// yamlToJSON converts a YAML document to JSON text, as Envoy does with its
// YAML bootstrap (envoy.yaml). Not for plugin configurations: those are
// read through internal/configfile, as atrl and make run read them
// (wasmPluginConfigs).
func yamlToJSON(t *testing.T, doc []byte) []byte {
	t.Helper()
	var v any
	require.NoError(t, yaml.Unmarshal(doc, &v))
	js, err := json.Marshal(v)
	require.NoError(t, err)
	return js
}

// buildOutputs are the files `make build` produces: the prerequisites of the
// Makefile's build target.
func buildOutputs(t *testing.T) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^build:[ \t]*(.*)$`).FindSubmatch(readRepoFile(t, "Makefile"))
	require.NotNil(t, m, "Makefile has no build target")
	outs := strings.Fields(string(m[1]))
	for _, o := range outs {
		require.Regexp(t, `(?m)^`+regexp.QuoteMeta(o)+`:`, string(readRepoFile(t, "Makefile")),
			"build prerequisite %s has no rule", o)
	}
	return outs
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	Cmd  string // upper case: FROM, COPY, RUN...
	Args string
}

func parseDockerfile(t *testing.T, rel string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(readRepoFile(t, rel))))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{Cmd: strings.ToUpper(cmd), Args: strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	require.NoError(t, sc.Err())
	require.Zero(t, cur.Len(), "%s ends in a continuation line", rel)
	return out
}
