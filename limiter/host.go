package limiter

import (
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
)

// The wrapper (higress-group/wasm-go) turns the host's calls into the hooks
// of Register, but keeps two things from them that the limiter needs: the
// host's id of an HTTP context (to act on a request from the tick, see
// queue.go) and the action a response-body hook returns (always continue,
// for a streaming hook). So the VM context Register installs is the
// wrapper's, wrapped: each HTTP context notes its id before the wrapper's
// hooks run, and may hold the last response chunk back (see holdLastChunk).

// vmContext wraps the wrapper's VM context.
type vmContext struct{ types.VMContext }

func (v vmContext) NewPluginContext(id uint32) types.PluginContext {
	return pluginContext{v.VMContext.NewPluginContext(id)}
}

// pluginContext wraps the wrapper's plugin context.
type pluginContext struct{ types.PluginContext }

func (p pluginContext) NewHttpContext(id uint32) types.HttpContext {
	return &httpContext{HttpContext: p.PluginContext.NewHttpContext(id), id: id}
}

// httpContext wraps the wrapper's HTTP context of one request.
type httpContext struct {
	types.HttpContext
	id uint32
}

// current is the HTTP context whose hook runs now (nil between hooks): a
// proxy-wasm VM runs one hook at a time.
var current *httpContext

// held is set by a response-body hook that wants the host to keep the last
// chunk (and the end of the stream) until it resumes the response.
var held bool

func (h *httpContext) OnHttpRequestHeaders(n int, end bool) types.Action {
	current = h
	defer func() { current = nil }()
	return h.HttpContext.OnHttpRequestHeaders(n, end)
}

// OnHttpResponseBody holds the last chunk when the hook asked to: the host
// buffers it and the end of the stream until ResumeHttpResponse.
func (h *httpContext) OnHttpResponseBody(size int, end bool) types.Action {
	current, held = h, false
	defer func() { current, held = nil, false }()
	action := h.HttpContext.OnHttpResponseBody(size, end)
	if end && held && action == types.ActionContinue {
		return types.ActionPause
	}
	return action
}

// currentContextID is the host's id of the HTTP context whose request-headers
// or response-body hook runs now (0 outside them).
func currentContextID() uint32 {
	if current == nil {
		return 0
	}
	return current.id
}

// holdLastChunk asks the host to keep the last response chunk, and the end
// of the stream, until the request calls proxywasm.ResumeHttpResponse: only
// from the response-body hook of the last chunk. It reports whether it can.
func holdLastChunk() bool {
	if current == nil {
		return false
	}
	held = true
	return true
}
