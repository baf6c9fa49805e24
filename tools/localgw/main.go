// Command localgw is a local gateway for machines without Docker or Envoy:
// an HTTP reverse proxy that runs the plugin (main.wasm) in the proxy-wasm
// host emulator, forwards to an upstream LLM, and sends the plugin's Redis
// calls to a real Redis. See package gateway for what it does per request.
//
//	localgw -config tools/localgw/example.yaml -upstream http://127.0.0.1:8081 \
//	        -redis 127.0.0.1:6379 [-wasm main.wasm] [-listen 127.0.0.1:0] [-log-level debug] \
//	        [-webhook http://127.0.0.1:9000]
//
// The plugin's budget alerts go to -webhook (path and body as the plugin
// sends them), or, without it, are printed: one line each ("gateway: budget
// alert → ..."), saying where it went and the answer, or the failure.
//
// The configuration file is read as atrl reads it (package
// internal/configfile): YAML, JSON when it ends in .json, or a Higress
// WasmPlugin manifest, whose first configuration it runs (the others are
// checked: the local gateway has no ingress, domain or service to match
// them by).
//
// The plugin's metrics are at /stats/prometheus on the same address, in
// Prometheus's text format, named and labelled as a Higress gateway serves
// them (gateway.MetricsPath); that path never reaches the plugin.
//
// It prints "localgw listening on http://<address>" on stdout once it
// accepts connections; the plugin's logs, its own and one line per request
// go to stderr. SIGINT or SIGTERM stop it. A configuration file that cannot
// be read, is not YAML or JSON, or that the plugin refuses, is said as
// `atrl check` says it, in the same words (the file, the place, the
// plugin's line, then the line of the file with a caret under the
// mistake), and exits with status 2 (bad flags too); any other failure to
// start, 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
	"github.com/tokenlimit/ai-token-ratelimit/tools/internal/serve"
	"github.com/tokenlimit/ai-token-ratelimit/tools/localgw/gateway"
)

func main() {
	var o options
	flag.StringVar(&o.listen, "listen", "127.0.0.1:0", "address to listen on (`host:port`; port 0 picks a free port)")
	flag.StringVar(&o.upstream, "upstream", "", "base `URL` of the LLM requests go to, e.g. http://127.0.0.1:8081 (required)")
	flag.StringVar(&o.redis, "redis", "127.0.0.1:6379", "Redis the plugin's calls go to (`host:port`)")
	flag.StringVar(&o.config, "config", "", "plugin configuration, YAML or JSON (`file`, required)")
	flag.StringVar(&o.wasm, "wasm", "main.wasm", "the plugin compiled to WASM (`file`; make build)")
	flag.StringVar(&o.logLevel, "log-level", "info", "the plugin's log level: trace, debug, info, warn, error, critical")
	flag.BoolVar(&o.quiet, "quiet", false, "do not log one line per request")
	flag.StringVar(&o.webhook, "webhook", "", "base `URL` the plugin's budget alerts are POSTed to (default: printed)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: localgw -config file -upstream URL [-redis host:port] [-wasm file] [-listen host:port] [-log-level level] [-quiet] [-webhook URL]\n\n"+
			"Runs the plugin in the proxy-wasm host emulator as a local gateway in front of an LLM.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := o.check(); err != nil {
		fmt.Fprintf(os.Stderr, "localgw: %v\n\n", err)
		flag.Usage()
		os.Exit(2)
	}
	if err := run(o); err != nil {
		var bad *badConfig
		if errors.As(err, &bad) {
			fmt.Fprintln(os.Stderr, bad) // starts with the file's name, as atrl check's does
			os.Exit(exitBadConfig)
		}
		fmt.Fprintf(os.Stderr, "localgw: %v\n", err)
		os.Exit(1)
	}
}

// exitBadConfig is the exit status of a configuration that cannot be read
// or that the plugin refuses, as for bad flags: run.sh (make run) stops on
// it without looking for another cause, the message saying it all.
const exitBadConfig = 2

// badConfig is a configuration file that cannot be read, is not YAML or
// JSON, or that the plugin refuses: a *configfile.Error, worded as atrl
// check words it.
type badConfig struct{ err *configfile.Error }

func (e *badConfig) Error() string { return e.err.Error() }

func (e *badConfig) Unwrap() error { return e.err }

type options struct {
	listen, upstream, redis, config, wasm, logLevel, webhook string
	quiet                                                    bool
}

// check reports flags that cannot work before anything starts.
func (o options) check() error {
	switch {
	case flag.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	case o.config == "":
		return errors.New("-config is required: the plugin's configuration, YAML or JSON (e.g. tools/localgw/example.yaml)")
	case o.upstream == "":
		return errors.New("-upstream is required: the LLM's base URL (e.g. http://127.0.0.1:8081; cd tools && go run ./mockllm starts a mock)")
	}
	return nil
}

func run(o options) error {
	wasm, err := os.ReadFile(o.wasm)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the plugin %s does not exist: build it with `make build`, or point -wasm at it", o.wasm)
	} else if err != nil {
		return fmt.Errorf("reading the plugin: %w", err)
	}
	configs, err := configfile.Load(o.config)
	if err != nil {
		var bad *configfile.Error
		if errors.As(err, &bad) {
			return &badConfig{bad}
		}
		return err
	}
	// Every configuration, as atrl check checks it (the plugin's own
	// parser, natively): a mistake is said at its line of the file.
	for i := range configs {
		if _, err := config.ParseDocument(configs[i].JSON); err != nil {
			return &badConfig{configs[i].Refused(err)}
		}
	}
	first := configs[0]
	if len(configs) > 1 {
		var others []string
		for _, c := range configs[1:] {
			others = append(others, c.Name)
		}
		fmt.Fprintf(os.Stderr, "localgw: %s holds %d configurations: it runs the first, %s; the local gateway matches no ingress, "+
			"domain or service, so the others are only checked (%s)\n", o.config, len(configs), first.Name, strings.Join(others, "; "))
	}
	gw, err := gateway.New(gateway.Options{Wasm: wasm, Config: first.JSON, Upstream: o.upstream, Redis: o.redis,
		LogLevel: o.logLevel, AccessLog: !o.quiet, Webhook: o.webhook})
	var refused *gateway.ConfigError
	if errors.As(err, &refused) { // what only the plugin checks: the environment of its VM
		return &badConfig{&configfile.Error{File: o.config, Config: first.Name, Msg: refused.Reason}}
	} else if err != nil {
		return err
	}
	defer gw.Close()
	if err := gw.PingRedis(); err != nil {
		fmt.Fprintf(os.Stderr, "localgw: warning: Redis at %s does not answer (%v); the plugin's failure_mode applies until it does\n", o.redis, err)
	}

	return serve.Run("localgw", o.listen, gw, 5*time.Second)
}
