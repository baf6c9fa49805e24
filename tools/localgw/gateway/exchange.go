package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"

	"github.com/tokenlimit/ai-token-ratelimit/internal/wasmhost"
)

// exchange is one request on its way through the plugin and the upstream.
// completed is guarded by the VM's lock; wroteHeader, status, by, length,
// written, delivered and left belong to the goroutine serving the request.
type exchange struct {
	g     *Gateway
	w     http.ResponseWriter
	r     *http.Request
	id    uint32 // the plugin's HTTP context
	peer  string // the client's ip:port (property source.address)
	reqID string // x-request-id (property x_request_id)
	sig   *signal
	start time.Time

	completed   bool // the plugin has seen the end of the stream
	wroteHeader bool
	status      int
	by          string // who answered: upstream, plugin, gateway
	length      int64  // the Content-Length the client was told, -1: none
	written     int64  // the bytes of the response body written
	delivered   bool   // the client has been handed all of the response it waits for
	left        bool   // a write or a wait failed: the client went away

	// bodyAnswer is set by the request body's goroutine when the request
	// is answered during the body: by the plugin, or by the gateway (504).
	bodyAnswer atomic.Pointer[answer]
}

// open creates the plugin's HTTP context for a request.
func (g *Gateway) open(w http.ResponseWriter, r *http.Request) (*exchange, error) {
	x := &exchange{g: g, w: w, r: r, peer: r.RemoteAddr, reqID: r.Header.Get("X-Request-Id"), start: time.Now(), sig: newSignal()}
	if x.reqID == "" {
		x.reqID = newRequestID()
	}
	err := g.vm.do(proxytest.PluginContextID, func(h proxytest.HostEmulator) {
		x.id = h.InitializeHttpContext()
		g.vm.signals[x.id] = x.sig
	})
	return x, err
}

// call calls into the plugin for this request, with the request's
// properties set as Envoy sets them per stream. It fails once the stream
// has completed, or when the plugin has crashed.
func (x *exchange) call(f func(proxytest.HostEmulator)) error {
	completed := false
	err := x.g.vm.do(x.id, func(h proxytest.HostEmulator) {
		if completed = x.completed; completed {
			return
		}
		x.setProperties(h)
		f(h)
	})
	if err == nil && completed {
		err = errCompleted
	}
	return err
}

func (x *exchange) setProperties(h proxytest.HostEmulator) {
	_ = h.SetProperty([]string{"source", "address"}, []byte(x.peer))
	_ = h.SetProperty([]string{"x_request_id"}, []byte(x.reqID))
}

// complete tells the plugin the stream has ended (after the last byte, or
// a reset) and sends the Redis calls it makes then, such as the charge.
func (x *exchange) complete() {
	_ = x.g.vm.do(x.id, func(h proxytest.HostEmulator) {
		if x.completed {
			return
		}
		x.completed = true
		x.setProperties(h)
		h.CompleteHttpContext(x.id)
	})
	// The Redis calls the end made are out (do sent them): the emulator
	// may drop the stream now, as a gateway does once it is done.
	_ = x.g.vm.do(x.id, func(h proxytest.HostEmulator) { wasmhost.Forget(h, x.id) })
	x.g.vm.unwatch(x.id)
	if x.g.accessLog {
		outcome := fmt.Sprintf("%d (%s)", x.status, x.by)
		if !x.wroteHeader {
			outcome = "no response"
		}
		if x.clientLeft() {
			outcome += ", client went away"
		}
		x.g.log.printf("gateway: %s %s %s → %s in %v", x.peer, x.r.Method, x.r.URL.RequestURI(), outcome,
			time.Since(x.start).Round(time.Millisecond))
	}
}

// clientLeft says whether the client went away before it had all of its
// response. Its request's context is cancelled when it closes its
// connection, also once it has read a whole response of known length (curl
// closes at once), which may come before the plugin has seen the end of the
// stream (it may hold the end while Redis answers the charge): that is no
// client going away.
func (x *exchange) clientLeft() bool {
	return !x.delivered && (x.left || x.r.Context().Err() != nil)
}

// wrote counts n bytes of the response body handed to the client.
func (x *exchange) wrote(n int) {
	x.written += int64(n)
	if x.length >= 0 && x.written >= x.length {
		x.delivered = true
	}
}

// serve runs the request through the plugin's request phases, the
// upstream, and the response phases.
//
// As in Envoy, what the request-headers hook returns says where the body
// goes: Continue, on to the upstream (through the body hook); StopIteration,
// into the body hook while the headers wait, until a chunk continues or the
// plugin resumes; StopAllIteration (or any other pause), nowhere until the
// plugin resumes.
func (x *exchange) serve() {
	noBody := x.r.Body == nil || x.r.Body == http.NoBody
	headers := requestHeaders(x.r, x.reqID)
	var action types.Action
	if err := x.call(func(h proxytest.HostEmulator) { action = h.CallOnRequestHeaders(x.id, headers, noBody) }); err != nil {
		x.crashed(err)
		return
	}
	ctx, cancel := context.WithCancel(x.r.Context())
	defer cancel()
	var body io.Reader = http.NoBody
	var startBody func()
	if !noBody {
		pr, pw := io.Pipe()
		defer pr.Close() // ends the body's goroutine however this ends
		body = pr
		startBody = func() { go x.pumpRequestBody(pw, cancel) }
		if action == types.HeaderStopIteration {
			startBody() // the body flows into the plugin while the headers wait
			startBody = nil
		}
	}
	if !x.proceed("request headers", true) {
		return
	}
	if startBody != nil {
		startBody()
	}
	var upstreamHeaders [][2]string
	if err := x.call(func(h proxytest.HostEmulator) { upstreamHeaders = cloneHeaders(h.GetCurrentRequestHeaders(x.id)) }); err != nil {
		x.crashed(err)
		return
	}
	req, err := x.upstreamRequest(ctx, upstreamHeaders, body, noBody)
	if err != nil {
		x.reply(gatewayReply(http.StatusBadRequest, err.Error()), "gateway", true)
		return
	}
	resp, err := x.g.transport.RoundTrip(req)
	if err != nil {
		switch a := x.bodyAnswer.Load(); {
		case a != nil:
			x.reply(a.reply, a.by, true)
		case x.r.Context().Err() != nil:
			// The client went away: nobody to answer.
		default:
			x.reply(gatewayReply(http.StatusServiceUnavailable,
				"upstream connect error or disconnect/reset before headers: "+err.Error()), "gateway", true)
		}
		return
	}
	defer resp.Body.Close()
	x.forwardResponse(resp)
}

// upstreamRequest builds the request to the upstream from what the plugin
// left of the request headers: the Host is the upstream's (as with Envoy's
// auto_host_rewrite), the rest as the plugin left it.
func (x *exchange) upstreamRequest(ctx context.Context, headers [][2]string, body io.Reader, noBody bool) (*http.Request, error) {
	path := header(headers, ":path")
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("the request path %q is not a path", path)
	}
	up := x.g.upstream
	req, err := http.NewRequestWithContext(ctx, header(headers, ":method"), up.Scheme+"://"+up.Host+strings.TrimSuffix(up.Path, "/")+path, body)
	if err != nil {
		return nil, fmt.Errorf("the request cannot go upstream: %v", err)
	}
	req.Header = toHTTP(headers, "host", "content-length")
	req.Host = up.Host
	req.ContentLength = 0
	if !noBody {
		req.ContentLength = -1
		if n, err := strconv.ParseInt(header(headers, "content-length"), 10, 64); err == nil && n >= 0 {
			req.ContentLength = n
		}
	}
	return req, nil
}
