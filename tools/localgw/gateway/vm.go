package gateway

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// emulatorInUse guards the host emulator, which is process-wide state.
var emulatorInUse atomic.Bool

// errCompleted: the request's stream has ended; the plugin is not called for it any more.
var errCompleted = errors.New("the request has completed")

// vm is the plugin, compiled to WASM, running in the host emulator: one VM
// like one Envoy worker thread. Every call into it holds mu, and after every
// call the Redis calls it made are sent to Redis; their replies come back
// into the plugin under mu too.
type vm struct {
	mu       sync.Mutex
	host     proxytest.HostEmulator
	wasm     proxytest.WasmVMContext
	reset    func()
	broken   error           // the plugin crashed: nothing more is called
	closed   bool            // stopped: nothing more is called
	sent     map[uint32]bool // Redis calls sent and not answered yet, by callout ID
	httpSent map[uint32]bool // HTTP calls likewise (webhook.go)
	webhook  string          // where the plugin's HTTP calls go ("": printed, see webhook.go)
	signals  map[uint32]*signal

	redis    *redisClient
	log      *logWriter
	calls    sync.WaitGroup // Redis and HTTP calls in flight
	stats    *stats
	redisBad atomic.Bool   // the last Redis call failed (to log changes only)
	ticks    atomic.Uint64 // the plugin's ticks so far
	samples  *samples      // the histograms' samples (prometheus.go)
}

// startVM loads the plugin and starts it with its configuration.
func startVM(wasm, config []byte, level uint32, redis *redisClient, webhook string, lw *logWriter, st *stats) (v *vm, err error) {
	if !emulatorInUse.CompareAndSwap(false, true) {
		return nil, errors.New("a gateway is already running in this process: the proxy-wasm host emulator is process-wide, so there can be only one at a time")
	}
	defer func() {
		if err != nil {
			emulatorInUse.Store(false)
		}
	}()
	// As a gateway runs it: the machine's clocks and randomness, each
	// stream's context deleted when it is done (wasmhost); every sample
	// of its histograms counted (prometheus.go).
	hist := newSamples()
	wasmVM, err := wasmhost.NewVM(wasm, wasmhost.Options{Recorded: hist.record})
	if err != nil {
		return nil, fmt.Errorf("loading the plugin: %w", err)
	}
	v = &vm{wasm: wasmVM, sent: map[uint32]bool{}, httpSent: map[uint32]bool{}, webhook: webhook, signals: map[uint32]*signal{},
		redis: redis, log: lw, stats: st, samples: hist}
	prevOut, prevFlags := log.Writer(), log.Flags()
	log.SetOutput(lw)
	log.SetFlags(0)
	v.host, v.reset = proxytest.NewHostEmulator(proxytest.NewEmulatorOption().
		WithPluginConfiguration(config).WithVMContext(wasmVM))
	v.reset = restoreLogAfter(v.reset, prevOut, prevFlags)
	v.host.RegisterForeignFunction("get_log_level", func([]byte) []byte {
		return binary.LittleEndian.AppendUint32(nil, level)
	})
	var status types.OnPluginStartStatus
	lw.hold()
	err = v.do(proxytest.PluginContextID, func(h proxytest.HostEmulator) { status = h.StartPlugin() })
	if err == nil && status != types.OnPluginStartStatusOK {
		err = &ConfigError{Reason: v.startLogs()}
	}
	// A refusal's lines are its error; any other start, and a crash,
	// shows what the plugin logged.
	var refused *ConfigError
	lw.release(!errors.As(err, &refused))
	if err != nil {
		v.stop()
		return nil, err
	}
	return v, nil
}

// restoreLogAfter makes a reset that also gives the standard logger back its
// output and flags.
func restoreLogAfter(reset func(), out io.Writer, flags int) func() {
	return func() {
		reset()
		log.SetOutput(out)
		log.SetFlags(flags)
	}
}

// startLogs is what the plugin logged at warn level and above while
// starting, without the plugin name and ids each line starts with.
func (v *vm) startLogs() string {
	var lines []string
	for _, l := range [][]string{v.host.GetWarnLogs(), v.host.GetErrorLogs(), v.host.GetCriticalLogs()} {
		for _, line := range l {
			lines = append(lines, stripLogTags(line))
		}
	}
	if len(lines) == 0 {
		return "(it logged no reason)"
	}
	return strings.Join(lines, "; ")
}

// stripLogTags removes the "[plugin] [id] [request id] " wasm-go puts first.
func stripLogTags(line string) string {
	rest := line
	for i := 0; i < 3; i++ {
		if !strings.HasPrefix(rest, "[") {
			return line
		}
		end := strings.Index(rest, "] ")
		if end < 0 {
			return line
		}
		rest = rest[end+2:]
	}
	return rest
}

// do calls into the plugin for a context, serialised with every other call,
// then sends the Redis calls it made. A panic (the plugin trapped, or the
// emulator refused something) marks the VM broken: a WASM module is not
// reliable after a trap, so nothing more is called.
func (v *vm) do(contextID uint32, f func(proxytest.HostEmulator)) (err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.broken != nil {
		return v.broken
	}
	if v.closed {
		return errors.New("the gateway is closed")
	}
	defer func() {
		if p := recover(); p != nil {
			v.broken = fmt.Errorf("the plugin crashed: %v", p)
			v.log.printf("gateway: %v; every request is answered 500 from now on", v.broken)
			err = v.broken
		}
	}()
	f(v.host)
	v.sendRedisCalls(contextID)
	v.sendHTTPCalls(contextID)
	if contextID != proxytest.PluginContextID {
		v.sendRedisCalls(proxytest.PluginContextID)
		v.sendHTTPCalls(proxytest.PluginContextID)
	}
	return nil
}

// sendRedisCalls sends the Redis calls of a context not sent yet. The query
// lives in the plugin's memory, so it is copied now, under mu.
func (v *vm) sendRedisCalls(contextID uint32) {
	for _, call := range v.host.GetRedisCalloutAttributesFromContext(contextID) {
		if v.sent[call.CalloutID] {
			continue
		}
		v.sent[call.CalloutID] = true
		v.calls.Add(1)
		v.stats.redisCalls.Add(1)
		v.stats.redisPending.Add(1)
		go v.forward(contextID, call.CalloutID, bytes.Clone(call.Query))
	}
}

// forward sends one Redis call and hands the reply (or a failed status) to
// the plugin.
func (v *vm) forward(contextID, calloutID uint32, query []byte) {
	defer v.calls.Done()
	defer v.stats.redisPending.Add(-1)
	reply, err := v.redis.do(query)
	status := int32(0)
	if err != nil {
		status, reply = 1, nil
		v.stats.redisFailures.Add(1)
		if !v.redisBad.Swap(true) {
			v.log.printf("gateway: Redis at %s failed: %v (answered to the plugin as a failed call; logged once until Redis answers again)", v.redis.addr, err)
		}
	} else if v.redisBad.Swap(false) {
		v.log.printf("gateway: Redis at %s answers again", v.redis.addr)
	}
	_ = v.do(contextID, func(h proxytest.HostEmulator) {
		delete(v.sent, calloutID)
		h.CallOnRedisCallResponse(calloutID, status, reply)
	})
	// A reply to a stream that is done (a charge's) may have made more
	// calls for it, now sent: the emulator's note of them goes too.
	_ = v.do(contextID, func(h proxytest.HostEmulator) {
		if _, open := v.signals[contextID]; !open && contextID != proxytest.PluginContextID {
			wasmhost.Forget(h, contextID)
		}
	})
	v.wake(contextID)
}

// tick calls the plugin's tick every 100 ms while it has set a tick period
// (wasm-go's is 100 ms), until done is closed.
func (v *vm) tick(done <-chan struct{}) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	var next time.Time
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			var period time.Duration
			ticked := false
			_ = v.do(proxytest.PluginContextID, func(h proxytest.HostEmulator) {
				period = time.Duration(h.GetTickPeriod()) * time.Millisecond
				if period > 0 && !now.Before(next) {
					h.Tick()
					ticked = true
				}
			})
			if ticked {
				v.ticks.Add(1)
				v.wake(proxytest.PluginContextID)
				if next = next.Add(period); next.Before(now) {
					next = now.Add(period)
				}
			}
		}
	}
}

// stop stops the VM: nothing more is called, Redis calls in flight get up
// to their timeout to finish, and the emulator is released.
func (v *vm) stop() {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	done := make(chan struct{})
	go func() { v.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(v.redis.settings.timeout + time.Second):
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reset()
	v.wasm.Close()
	v.redis.close()
	emulatorInUse.Store(false)
}

// signal wakes whoever waits for a context's paused stream when a Redis
// reply for it has been handled. Take the channel before looking at the
// stream's state, then wait on it: a wake in between is not lost.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func newSignal() *signal { return &signal{ch: make(chan struct{})} }

func (s *signal) wait() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ch
}

func (s *signal) broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.ch)
	s.ch = make(chan struct{})
}

// watch registers a context's signal; unwatch removes it.
func (v *vm) watch(contextID uint32) *signal {
	s := newSignal()
	v.mu.Lock()
	v.signals[contextID] = s
	v.mu.Unlock()
	return s
}

func (v *vm) unwatch(contextID uint32) {
	v.mu.Lock()
	delete(v.signals, contextID)
	v.mu.Unlock()
}

// wake wakes whoever waits for a context. The plugin's own context (its
// tick, and the Redis calls made from it) may resume or answer any paused
// stream, as a queue's retries do: that wakes every waiter, each of which
// looks at its own stream.
func (v *vm) wake(contextID uint32) {
	v.mu.Lock()
	var woken []*signal
	if contextID == proxytest.PluginContextID {
		for _, s := range v.signals {
			woken = append(woken, s)
		}
	} else if s := v.signals[contextID]; s != nil {
		woken = append(woken, s)
	}
	v.mu.Unlock()
	for _, s := range woken {
		s.broadcast()
	}
}
