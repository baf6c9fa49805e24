// Command noopplugin is the benchmark baseline: a plugin with the same hooks
// as the limiter, through the same wrapper, that does nothing in them. The
// limiter's cost is what it adds on top of this.
package main

import (
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/gjson"
)

type config struct{ ruleName string }

func main() {}

func init() {
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
