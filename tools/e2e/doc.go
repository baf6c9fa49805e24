// Package e2e tests the plugin end to end over real HTTP, without Docker or
// Envoy: HTTP clients → the local gateway (tools/localgw/gateway: main.wasm in
// the proxy-wasm host emulator) → the mock LLM (tools/mockllm/llm), with the
// plugin's Redis calls going to a real redis-server that each test starts.
//
// TestMain builds the plugin from the module root once; run the suite with
// `make e2e` or `go test -count=1 ./e2e/...`. It needs redis-server on the
// PATH, like the rest of the tests.
package e2e
