// Command wasm is the do-nothing plugin (package noopplugin) as a proxy-wasm
// module, the baseline of the WASM-mode benchmarks.
package main

import "github.com/tokenlimit/ai-token-ratelimit/tools/noopplugin"

func main() {}

func init() { noopplugin.Register() }
