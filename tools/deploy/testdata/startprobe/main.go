//go:build wasip1

// Command startprobe is a WASI reactor, built like the plugin
// (-buildmode=c-shared), for hostabi_test.go: while it initializes it does
// what the environment variable START_PROBE names, so that the test can show
// that the start check refuses what Higress refuses and lets the rest through.
package main

import (
	"fmt"
	"os"
)

// setTickPeriod is the proxy-wasm host call a plugin makes to get ticks.
//
//go:wasmimport env proxy_set_tick_period_milliseconds
func setTickPeriod(ms uint32) uint32

func init() {
	switch os.Getenv("START_PROBE") {
	case "proxy-call": // a proxy-wasm call from init, as if the SDK were used there
		setTickPeriod(1000)
	case "exit": // log.Fatal or os.Exit in init
		os.Exit(3)
	case "read-stdin":
		var b [1]byte
		_, _ = os.Stdin.Read(b[:])
	case "open-file": // reading a file into a package-level variable
		_, _ = os.Open("/etc/hosts")
	}
	fmt.Fprintln(os.Stderr, "startprobe: initialized")
}

func main() {}
