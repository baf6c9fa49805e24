// Package noopplugin is the benchmark baseline: a plugin with the same hooks
// as the limiter, through the same wrapper, that does nothing in them. The
// limiter's cost is what it adds on top of this. Register installs it for Go
// mode; ./wasm is the same as a proxy-wasm module.
package noopplugin

import (
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/gjson"
)

// WASM is the main package of the do-nothing plugin as a proxy-wasm module.
const WASM = "github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin/wasm"

type config struct{ ruleName string }

// Register installs the do-nothing plugin's hooks as the process's
// proxy-wasm VM context, as limiter.Register does the limiter's.
func Register() {
	wrapper.SetCtx(
		"noop",
		wrapper.ParseConfig(func(json gjson.Result, c *config) error {
			c.ruleName = json.Get("rule_name").String()
			return nil
		}),
		wrapper.ProcessRequestHeaders(func(wrapper.HttpContext, config) types.Action { return types.ActionContinue }),
		wrapper.ProcessRequestBody(func(wrapper.HttpContext, config, []byte) types.Action { return types.ActionContinue }),
		wrapper.ProcessResponseHeaders(func(wrapper.HttpContext, config) types.Action { return types.ActionContinue }),
		wrapper.ProcessStreamingResponseBody(func(_ wrapper.HttpContext, _ config, chunk []byte, _ bool) []byte { return chunk }),
		wrapper.ProcessStreamDone(func(wrapper.HttpContext, config) {}),
	)
}
