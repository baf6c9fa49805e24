package config_test

import (
	"encoding/json"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// The README's configuration examples are what users copy: each must parse.
func TestReadmeExamplesAreValid(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	blocks := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllSubmatch(readme, -1)
	require.GreaterOrEqual(t, len(blocks), 4, "the README lost its examples")
	for _, b := range blocks {
		var doc map[string]any
		require.NoError(t, yaml.Unmarshal(b[1], &doc), "%s", b[1])
		js, err := json.Marshal(doc)
		require.NoError(t, err)
		_, err = config.ParseString(string(js))
		require.NoError(t, err, "README example refused:\n%s", b[1])
	}
}
