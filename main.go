// Command ai-token-ratelimit is a proxy-wasm plugin for Envoy and the Higress
// gateway that limits what each subject may spend in LLM tokens, with
// counters in Redis shared by every gateway replica. This file lists the
// hooks; package limiter holds the flow.
package main

import (
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

func main() {}

func init() {
	wrapper.SetCtx(
		"ai-token-ratelimit",
		wrapper.PrePluginStartOrReload[limiter.PluginConfig](limiter.OnPluginStart),
		wrapper.ParseConfig(limiter.ParseConfig),
		wrapper.ProcessRequestHeaders(limiter.OnRequestHeaders),
		wrapper.ProcessRequestBody(limiter.OnRequestBody),
		wrapper.ProcessResponseHeaders(limiter.OnResponseHeaders),
		wrapper.ProcessStreamingResponseBody(limiter.OnResponseBody),
		wrapper.ProcessStreamDone(limiter.OnStreamDone),
	)
}
