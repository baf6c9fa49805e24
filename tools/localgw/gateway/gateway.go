// Package gateway is a local stand-in for an Envoy/Higress gateway running
// one proxy-wasm plugin, for machines without Docker or Envoy: an HTTP
// reverse proxy that runs every request through the plugin, compiled to
// WASM, in the host emulator of proxy-wasm-go-sdk (proxytest, on wazero),
// and sends the plugin's Redis calls to a real Redis.
//
// For each request the plugin sees what Envoy would show it: the request
// headers with :method, :path, :authority and :scheme and the property
// source.address (the client's ip:port), the request body chunk by chunk,
// the response headers, the response body chunk by chunk as it streams, and
// the end of the stream, also when a client goes away mid-stream (a reset).
// A request the plugin pauses waits until it resumes it or answers it
// (e.g. a 429); its header changes are applied upstream and downstream.
// Redis calls go over RESP to the Redis given, within the timeout of the
// plugin's redis section; an unreachable or silent Redis is a failed call,
// as in Envoy.
//
// One Gateway is one plugin VM, like one Envoy worker thread: calls into the
// plugin are serialised. The emulator is process-wide, so a process runs one
// Gateway at a time.
//
// It is a development tool, not a production proxy: the emulator keeps some
// state for every request it has seen, and never deletes the plugin's
// per-request context in WASM (it does not call proxy_on_delete), so memory
// grows by about 15 KB per request. Restart it between long load runs.
//
// The plugin's metrics are served at MetricsPath (/stats/prometheus) on
// the same listener, named and labelled as a Higress gateway's Envoy
// serves them (prometheus.go); that path never reaches the plugin.
//
// Simplifications: a plugin that pauses the response headers or the end of
// a body is waited for (up to PauseTimeout) rather than fed more data; the
// Host header upstream is the upstream's; X-Forwarded-For is left as the
// client sent it (use_remote_address off).
package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync/atomic"
	"time"
)

// Options configure a Gateway.
type Options struct {
	Wasm     []byte // the plugin, compiled to WASM
	Config   []byte // its configuration, JSON (see internal/configfile)
	Upstream string // base URL requests are forwarded to, e.g. http://127.0.0.1:8081
	Redis    string // host:port of the Redis the plugin's calls go to
	// Webhook is the base URL the plugin's HTTP calls (budget alerts) go
	// to, whatever cluster they name; "": the gateway prints each and
	// answers 204.
	Webhook string

	LogLevel  string    // the plugin's log level: trace, debug, info (default), warn, error, critical
	Log       io.Writer // the plugin's logs and the gateway's; nil: os.Stderr
	AccessLog bool      // log one line per request

	// PauseTimeout bounds how long the plugin may keep a request paused
	// before the gateway answers 504; 0: 30 s.
	PauseTimeout time.Duration
	// UpstreamTimeout bounds the wait for the upstream's response headers;
	// 0: 5 min (LLMs can think long before the first byte).
	UpstreamTimeout time.Duration
}

// Gateway is a running plugin behind an HTTP handler.
type Gateway struct {
	vm        *vm
	upstream  *url.URL
	transport *http.Transport
	log       *logWriter
	accessLog bool
	pause     time.Duration
	stats     stats
	done      chan struct{}
	closed    atomic.Bool
}

// stats are the counters behind Stats.
type stats struct {
	requests, active                        atomic.Int64
	redisCalls, redisFailures, redisPending atomic.Int64
}

// Stats is a snapshot of what a Gateway has done.
type Stats struct {
	Requests      int64 // requests received (for the plugin: not MetricsPath's)
	Active        int64 // requests being served now
	RedisCalls    int64 // Redis calls the plugin made
	RedisFailures int64 // of which were answered as failed (unreachable, timed out)
	RedisPending  int64 // Redis calls in flight now
}

// New starts the plugin with its configuration. It fails when the WASM
// cannot be loaded, the plugin refuses the configuration (the error carries
// the plugin's reason), or an option is invalid. A Redis that is down is not
// an error: the plugin's failure_mode applies until it answers.
func New(o Options) (*Gateway, error) {
	if len(o.Wasm) == 0 {
		return nil, errors.New("no plugin: the WASM module is empty")
	}
	up, err := url.Parse(o.Upstream)
	if err != nil || (up.Scheme != "http" && up.Scheme != "https") || up.Host == "" {
		return nil, fmt.Errorf("upstream %q: want a base URL such as http://127.0.0.1:8081", o.Upstream)
	}
	if _, _, err := net.SplitHostPort(o.Redis); err != nil {
		return nil, fmt.Errorf("redis %q: want host:port, such as 127.0.0.1:6379", o.Redis)
	}
	level, err := parseLogLevel(o.LogLevel)
	if err != nil {
		return nil, err
	}
	out := o.Log
	if out == nil {
		out = os.Stderr
	}
	g := &Gateway{upstream: up, accessLog: o.AccessLog, pause: o.PauseTimeout, done: make(chan struct{}),
		log: &logWriter{out: out, trace: level == 0}}
	if g.pause <= 0 {
		g.pause = 30 * time.Second
	}
	headerTimeout := o.UpstreamTimeout
	if headerTimeout <= 0 {
		headerTimeout = 5 * time.Minute
	}
	g.transport = &http.Transport{
		Proxy:                 nil, // the upstream is reached directly, whatever HTTP_PROXY says
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: headerTimeout,
		DisableCompression:    true, // the plugin must see the body as the upstream sent it
	}
	redis := newRedisClient(o.Redis, readRedisSettings(o.Config))
	if o.Webhook != "" {
		if u, err := url.Parse(o.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("webhook %q: want a base URL such as http://127.0.0.1:9000", o.Webhook)
		}
	}
	g.vm, err = startVM(o.Wasm, o.Config, level, redis, o.Webhook, g.log, &g.stats)
	if err != nil {
		return nil, err
	}
	go g.vm.tick(g.done)
	return g, nil
}

// ServeHTTP runs one request through the plugin and the upstream, or
// answers MetricsPath.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == MetricsPath {
		g.serveMetrics(w, r)
		return
	}
	g.stats.requests.Add(1)
	g.stats.active.Add(1)
	defer g.stats.active.Add(-1)
	x, err := g.open(w, r)
	if err != nil {
		http.Error(w, "gateway: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer x.complete()
	x.serve()
}

// Stats returns the gateway's counters.
func (g *Gateway) Stats() Stats {
	return Stats{
		Requests:      g.stats.requests.Load(),
		Active:        g.stats.active.Load(),
		RedisCalls:    g.stats.redisCalls.Load(),
		RedisFailures: g.stats.redisFailures.Load(),
		RedisPending:  g.stats.redisPending.Load(),
	}
}

// WaitIdle waits until no request is being served and no Redis call is in
// flight, then for the plugin's next tick (what a stream that ended without
// its last chunk cost is charged from there) and its calls: e.g. until the
// charge of a response that has been read is in Redis. It returns ctx's
// error if that comes first.
func (g *Gateway) WaitIdle(ctx context.Context) error {
	if err := g.waitNoWork(ctx); err != nil {
		return err
	}
	seen := g.vm.ticks.Load()
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for g.vm.ticks.Load() == seen {
		select {
		case <-ctx.Done():
			return fmt.Errorf("the plugin's tick did not come: %w", ctx.Err())
		case <-t.C:
		}
	}
	return g.waitNoWork(ctx)
}

// waitNoWork waits until no request is being served and no Redis call is
// in flight.
func (g *Gateway) waitNoWork(ctx context.Context) error {
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for g.stats.active.Load() > 0 || g.stats.redisPending.Load() > 0 {
		select {
		case <-ctx.Done():
			s := g.Stats()
			return fmt.Errorf("gateway not idle (%d requests active, %d Redis calls in flight): %w", s.Active, s.RedisPending, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// Close stops the plugin and releases the emulator; Redis calls in flight
// get their timeout to finish. Requests still being served are answered
// 500 from then on: stop the HTTP server first.
func (g *Gateway) Close() error {
	if !g.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(g.done)
	g.vm.stop()
	g.transport.CloseIdleConnections()
	return nil
}

// PingRedis checks that the Redis the plugin's calls go to answers, with
// the login and database of the plugin's redis section.
func (g *Gateway) PingRedis() error { return g.vm.redis.ping() }
