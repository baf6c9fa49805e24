// Command ai-token-ratelimit is a proxy-wasm plugin for Envoy and the Higress
// gateway that limits what each subject may spend in LLM tokens, with
// counters in Redis shared by every gateway replica. Package limiter holds
// the hooks (limiter.Register lists them) and the per-request flow.
package main

import "github.com/tokenlimit/ai-token-ratelimit/limiter"

func main() {}

func init() { limiter.Register() }
