package config_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
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
			configs, err := configfile.Read(where, b.text)
			if errors.Is(err, configfile.ErrNoPlugin) {
				continue // another Kubernetes object
			}
			require.NoError(t, err, "%s:\n%s", where, b.text)
			for _, c := range configs {
				if _, err := config.ParseDocument(c.JSON); err != nil {
					t.Fatalf("%s: example refused (an excerpt of a larger file: fence it ```yaml excerpt):\n%s\n%s", where, c.Refused(err), b.text)
				}
			}
		}
	}
	// The README held 20 examples before the reference moved to docs/, and
	// keeps 5 of its own.
	require.GreaterOrEqual(t, total, 25, "the README and docs/ lost examples")
}
