package limiter

import (
	"errors"
	"os"
	"unsafe"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// The wrapper (higress-group/wasm-go) turns the host's calls into the hooks
// of Register, but keeps things from them that the limiter needs: the
// host's id of an HTTP context (to act on a request from the tick, see
// queue.go), the action a response-body hook returns (always continue,
// for a streaming hook), and the say over which bodies are read: it skips
// a body whose headers claim it is binary (a Content-Type that merely
// contains "octet-stream", any Content-Encoding, even identity), the
// response of any request that carries Connection: upgrade and Upgrade:
// websocket, whatever the upstream answers, and it has no trailers hook,
// so a request that ends with trailers never reaches the end of its body
// and goes on, unadmitted, when they come. So the VM context Register
// installs is the wrapper's, wrapped: each HTTP context notes its id before
// the wrapper's hooks run, and the limiter reads the bodies it needs itself
// (bodies.go): Register gives the wrapper no body hook.

// vmContext wraps the wrapper's VM context.
type vmContext struct{ types.VMContext }

func (v vmContext) NewPluginContext(id uint32) types.PluginContext {
	return &pluginContext{PluginContext: v.VMContext.NewPluginContext(id)}
}

// pluginContext wraps the wrapper's plugin context.
type pluginContext struct {
	types.PluginContext
	start *startState // what its configurations share (nil until they are parsed)
}

// OnPluginStart refuses a configuration the limiter cannot run with one
// log line saying what is wrong and where, before the wrapper reads it: the
// wrapper would say it three times over, under its own wording ("parse rule
// config failed: parse config failed, no valid rules; global config parse
// error: ..."). A configuration it takes goes to the wrapper, which parses
// it again, per rule, into the configurations requests use.
func (p *pluginContext) OnPluginStart(size int) types.OnPluginStartStatus {
	data, err := proxywasm.GetPluginConfiguration()
	if err != nil && !errors.Is(err, types.ErrorStatusNotFound) {
		// The wrapper says so itself, and fails the start.
		return p.PluginContext.OnPluginStart(size)
	}
	doc, err := config.ParseDocument(data)
	if err == nil {
		err = doc.ResolvePasswords(os.Getenv) // the VM's environment: where the gateway puts a Secret
	}
	if err != nil {
		log.Error(config.Refusal(err))
		return types.OnPluginStartStatusFailed
	}
	status := p.PluginContext.OnPluginStart(size)
	if status == types.OnPluginStartStatusOK {
		p.start = started
	}
	return status
}

// OnPluginDone comes when the gateway is done with the plugin: after a
// reload, once the last request of the replaced configuration has ended (a
// reload starts the plugin anew beside it, with a state of its own), or
// when the gateway stops. What its start still has to send (postponed
// charges, local windows' debts, budget alerts' bodies) would be lost with
// it: while there is some, the plugin answers not yet, and its tick goes on
// sending until nothing is left, or for at most finishTicks, then tells the
// gateway it is done (see startState.finish). What requests counted since
// the last tick is added to the metrics at once.
func (p *pluginContext) OnPluginDone() bool {
	if p.start == nil {
		return true
	}
	p.start.flushTallies() // the counts since the last tick, which the metrics keep
	if p.start.idle() {
		return true
	}
	p.start.finishing = true
	log.Infof("plugin done: %s still to send; sending it before the plugin goes (at most %d s)", p.start.pending(), finishTicks*tickMs/1000)
	return false
}

func (p *pluginContext) NewHttpContext(id uint32) types.HttpContext {
	return &httpContext{HttpContext: p.PluginContext.NewHttpContext(id), id: id}
}

// httpContext wraps the wrapper's HTTP context of one request, and holds
// the limiter's state of it: a field read by every hook, where the
// wrapper's context map would cost an allocation per request and a lookup
// per response chunk.
type httpContext struct {
	types.HttpContext
	id  uint32
	req *request  // the request's state, once a rule applies to it (nil: none)
	ep  *endpoint // the state of an admin API request whose body is being read
}

// current is the HTTP context whose hook runs now (nil between hooks): a
// proxy-wasm VM runs one hook at a time.
var current *httpContext

// keepResponseEnd is set by a hook that wants the host to keep the end of the
// response (its last chunk, or its trailers) until it resumes the response.
var keepResponseEnd bool

func (h *httpContext) OnHttpRequestHeaders(n int, end bool) types.Action {
	current = h
	defer func() { current = nil }()
	return h.HttpContext.OnHttpRequestHeaders(n, end)
}

// OnHttpResponseHeaders and OnHttpStreamDone only make h the current
// context for the wrapper's hooks (onResponseHeaders, onStreamDone).
func (h *httpContext) OnHttpResponseHeaders(n int, end bool) types.Action {
	current = h
	defer func() { current = nil }()
	return h.HttpContext.OnHttpResponseHeaders(n, end)
}

func (h *httpContext) OnHttpStreamDone() {
	current = h
	defer func() { current = nil }()
	h.HttpContext.OnHttpStreamDone()
}

// currentRequest is the limiter's state of the request whose hook runs now
// (nil: none, or no rule applies to it).
func currentRequest() *request {
	if current == nil {
		return nil
	}
	return current.req
}

// setCurrentRequest makes r (nil: none) the state of the request whose
// hook runs now, for its later hooks.
func setCurrentRequest(r *request) {
	if current != nil {
		current.req = r
	}
}

// wrapperContext is the wrapper's HTTP context of the request.
func (h *httpContext) wrapperContext() wrapper.HttpContext {
	ctx, _ := h.HttpContext.(wrapper.HttpContext)
	return ctx
}

// OnHttpRequestBody buffers a body the limiter reads (the host keeps it
// while the hook pauses) and hands it over at its end. Any other body waits
// while Redis decides: a gateway does not deliver it before the headers go
// on, but nothing of a request may pass before its admission, whatever the
// host.
func (h *httpContext) OnHttpRequestBody(size int, end bool) types.Action {
	current = h
	defer func() { current = nil }()
	if e := h.ep; e != nil {
		return e.bodyChunk(size, end)
	}
	r := h.req
	if r != nil && !r.readsBody() && r.phase.undecided() {
		r.bufferedBytes = int64(size) // the host's buffer so far: it goes on when the request does (resume)
		return types.ActionPause
	}
	if r == nil || !r.readsBody() {
		action := h.HttpContext.OnHttpRequestBody(size, end)
		if r != nil && action == types.ActionContinue {
			r.bodyBytes += int64(size) // what passed on
		}
		return action
	}
	if !end {
		return types.ActionPause
	}
	return r.bodyEnded(h.wrapperContext(), h.requestBody(size))
}

// OnHttpRequestTrailers ends the body of a request that ends with trailers:
// the last body chunk came without the end of the stream. The trailers wait
// for the admission like the body would have; nothing of a request goes on
// before its admission is decided.
func (h *httpContext) OnHttpRequestTrailers(n int) types.Action {
	current = h
	defer func() { current = nil }()
	if e := h.ep; e != nil {
		return e.trailers()
	}
	r := h.req
	switch {
	case r == nil:
		return h.HttpContext.OnHttpRequestTrailers(n)
	case r.readsBody():
		return r.bodyEnded(h.wrapperContext(), h.requestBody(maxBufferedBody))
	case r.phase.undecided():
		return types.ActionPause // Redis has not decided: the trailers wait with the rest
	}
	return types.ActionContinue
}

// maxBufferedBody is more than any body the host buffers (its limit is
// an int32 of bytes): asked for that much, the host gives the whole buffer.
const maxBufferedBody = 1<<31 - 1

// requestBody returns the request body the host buffered, nil when there is
// none (a request whose trailers follow its headers).
func (h *httpContext) requestBody(size int) []byte {
	if size <= 0 {
		return nil
	}
	body := hostBuffer(requestBodyBuffer, size)
	if body == nil {
		log.Debugf("reading the request body: the host gave none of its %d bytes", size)
	}
	return body
}

// bodyBuffer is a body's buffer type in proxy-wasm's ABI.
type bodyBuffer uint32

const (
	requestBodyBuffer  bodyBuffer = 0
	responseBodyBuffer bodyBuffer = 1
)

// headerMap is a header map's type in proxy-wasm's ABI.
type headerMap uint32

const (
	requestHeaders  headerMap = 0
	responseHeaders headerMap = 2
)

// eachHeaderValue calls f with the value of each pair of a serialized
// header map (proxy-wasm's: the number of pairs, then each pair's key and
// value sizes, then each key and value followed by a NUL; sizes are 32-bit
// little-endian) whose key is name, ASCII case ignored, in order. A map cut
// short is read as far as it goes.
func eachHeaderValue(m []byte, name string, f func(string)) {
	u32 := func(at int) int {
		return int(m[at]) | int(m[at+1])<<8 | int(m[at+2])<<16 | int(m[at+3])<<24
	}
	if len(m) < 4 {
		return
	}
	pairs := u32(0)
	if pairs > (len(m)-4)/8 {
		return
	}
	data := 4 + 8*pairs
	for i := 0; i < pairs; i++ {
		kn, vn := u32(4+8*i), u32(8+8*i)
		if kn > len(m)-data || vn > len(m)-data-kn-1 || data+kn+1+vn >= len(m) {
			return
		}
		key := m[data : data+kn]
		value := m[data+kn+1 : data+kn+1+vn]
		data += kn + 1 + vn + 1
		if len(key) == len(name) && equalFoldBytes(key, name) {
			f(unsafe.String(unsafe.SliceData(value), len(value))) // m is the caller's, never written: no copy
		}
	}
}

// equalFoldBytes reports whether b and s are equal, ASCII letters compared
// case-insensitively.
func equalFoldBytes(b []byte, s string) bool {
	for i := range b {
		x, y := b[i], s[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// responseHeader returns a response header's value ("" when absent).
func responseHeader(name string) string { return hostHeader(responseHeaders, name) }

// OnHttpResponseBody hands each chunk of a response the limiter reads to it,
// and holds the last chunk when the hook asked to: the host buffers it and
// the end of the stream until ResumeHttpResponse.
func (h *httpContext) OnHttpResponseBody(size int, end bool) types.Action {
	r := h.req
	if r == nil || !r.readsResponse {
		current, keepResponseEnd = h, false
		defer func() { current, keepResponseEnd = nil, false }()
		return h.HttpContext.OnHttpResponseBody(size, end)
	}
	// Every chunk of a stream comes here: no deferred closure (a panic
	// would end the VM anyway, past any reset).
	current, keepResponseEnd = h, false
	var chunk []byte
	if size > 0 {
		chunk = hostBuffer(responseBodyBuffer, size)
	}
	if out, changed := r.responseChunk(chunk, end); changed {
		if err := proxywasm.ReplaceHttpResponseBody(out); err != nil {
			log.Warnf("replacing a response chunk failed: %v", err)
		}
	}
	hold := end && keepResponseEnd
	current, keepResponseEnd = nil, false
	if hold {
		return types.ActionPause
	}
	return types.ActionContinue
}

// OnHttpResponseTrailers ends the body of a response that ends with
// trailers, as its last chunk would; the trailers are held while its
// charges are answered.
func (h *httpContext) OnHttpResponseTrailers(n int) types.Action {
	current, keepResponseEnd = h, false
	defer func() { current, keepResponseEnd = nil, false }()
	r := h.req
	if r == nil || !r.readsResponse {
		return h.HttpContext.OnHttpResponseTrailers(n)
	}
	r.responseTrailers()
	if keepResponseEnd {
		return types.ActionPause
	}
	return types.ActionContinue
}

// currentContextID is the host's id of the HTTP context whose request-headers
// or body hook runs now (0 outside them).
func currentContextID() uint32 {
	if current == nil {
		return 0
	}
	return current.id
}

// holdLastChunk asks the host to keep the end of the response (the last
// chunk, or the trailers) until the request calls
// proxywasm.ResumeHttpResponse: only from the hook of the response's end.
// It reports whether it can.
func holdLastChunk() bool {
	if current == nil {
		return false
	}
	keepResponseEnd = true
	return true
}
