package e2e

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/tools/localgw/gateway"
)

// Mistakes a user can make when starting a gateway give an error that says
// what is wrong, with the plugin's own words for a bad configuration.
func TestGatewayStartErrors(t *testing.T) {
	options := func(config string) gateway.Options {
		return gateway.Options{Wasm: pluginWasm, Config: []byte(config), Upstream: "http://127.0.0.1:9",
			Redis: "127.0.0.1:9", Log: io.Discard}
	}

	t.Run("a configuration the plugin refuses", func(t *testing.T) {
		_, err := gateway.New(options(`{"rule_name": "x", "rule_items": [{"limit_by_header": "x-api-key",
			"limit_keys": [{"key": "k", "token_per_minuet": 10}]}], "redis": {"service_name": "redis.static"}}`))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "the plugin refused its configuration")
		assert.Contains(t, err.Error(), "token_per_minuet")
		assert.Contains(t, err.Error(), "unknown field")
		assert.NotContains(t, err.Error(), "[ai-token-ratelimit]", "without the log tags")
	})

	t.Run("bytes that are not a WASM module", func(t *testing.T) {
		o := options(`{}`)
		o.Wasm = []byte("#!/bin/sh\necho not wasm\n")
		_, err := gateway.New(o)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "loading the plugin")
	})

}
