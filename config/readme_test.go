package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// docFiles are the documentation pages users read, relative to this
// package: README.md and every docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	require.NotEmpty(t, docs, "docs/ has no pages")
	return append([]string{"../README.md"}, docs...)
}

// yamlBlock is one ```yaml block of a page: where it starts, and its text.
// A block fenced with more words (```yaml excerpt) is a part of a larger
// file, not a whole configuration, and is not checked.
type yamlBlock struct {
	line int
	text []byte
}

var yamlFence = regexp.MustCompile("(?ms)^[ \t]*```yaml\n(.*?)^[ \t]*```")

func yamlBlocks(t *testing.T, file string) []yamlBlock {
	t.Helper()
	page, err := os.ReadFile(file)
	require.NoError(t, err)
	var blocks []yamlBlock
	for _, m := range yamlFence.FindAllSubmatchIndex(page, -1) {
		blocks = append(blocks, yamlBlock{
			line: 1 + bytes.Count(page[:m[0]], []byte("\n")),
			text: page[m[2]:m[3]],
		})
	}
	return blocks
}

// pluginConfigs are the plugin configurations in one YAML document: the
// document itself, or, for a Higress WasmPlugin manifest, its defaultConfig
// and each matchRules entry's config. Another Kubernetes manifest (an
// apiVersion and a kind) holds none.
func pluginConfigs(doc map[string]any) []any {
	if _, ok := doc["apiVersion"]; !ok {
		return []any{doc}
	}
	if doc["kind"] != "WasmPlugin" {
		return nil
	}
	spec, _ := doc["spec"].(map[string]any)
	var configs []any
	if c, ok := spec["defaultConfig"]; ok {
		configs = append(configs, c)
	}
	rules, _ := spec["matchRules"].([]any)
	for _, r := range rules {
		if c, ok := r.(map[string]any)["config"]; ok {
			configs = append(configs, c)
		}
	}
	return configs
}

// The configuration examples of the README and of docs/ are what users
// copy: each ```yaml block must parse as the plugin parses its
// configuration (a WasmPlugin manifest: each configuration it holds). Fence
// an excerpt of a larger file as ```yaml excerpt.
func TestReadmeExamplesAreValid(t *testing.T) {
	total := 0
	for _, file := range docFiles(t) {
		blocks := yamlBlocks(t, file)
		if file == "../README.md" {
			require.GreaterOrEqual(t, len(blocks), 5, "README.md lost its common configurations")
		}
		total += len(blocks)
		for _, b := range blocks {
			where := fmt.Sprintf("%s:%d", file[len("../"):], b.line)
			dec := yaml.NewDecoder(bytes.NewReader(b.text))
			for {
				var doc map[string]any
				err := dec.Decode(&doc)
				if errors.Is(err, io.EOF) {
					break
				}
				require.NoError(t, err, "%s: not YAML:\n%s", where, b.text)
				for _, c := range pluginConfigs(doc) {
					js, err := json.Marshal(c)
					require.NoError(t, err, "%s", where)
					_, err = config.ParseString(string(js))
					require.NoError(t, err, "%s: example refused (an excerpt of a larger file: fence it ```yaml excerpt):\n%s", where, b.text)
				}
			}
		}
	}
	// The README held 20 examples before the reference moved to docs/, and
	// keeps 5 of its own.
	require.GreaterOrEqual(t, total, 25, "the README and docs/ lost examples")
}
