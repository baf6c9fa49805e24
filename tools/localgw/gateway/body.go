package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
)

// chunkSize is the most a body chunk handed to the plugin holds.
const chunkSize = 32 << 10

// pumpRequestBody feeds the request body to the plugin chunk by chunk and
// what it lets through to the upstream. A chunk the plugin pauses on stays
// buffered (in the emulator) until it continues; at the end of the body a
// pause waits for the plugin to resume or answer. As with Envoy's HTTP/1
// codec, the end of the body comes as an empty last chunk.
func (x *exchange) pumpRequestBody(pw *io.PipeWriter, cancel context.CancelFunc) {
	buf := make([]byte, chunkSize)
	for {
		n, err := x.r.Body.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			pw.CloseWithError(fmt.Errorf("reading the request body: %w", err))
			return
		}
		if n > 0 && !x.passRequestChunk(pw, cancel, buf[:n], false) {
			return
		}
		if err != nil { // io.EOF
			if x.passRequestChunk(pw, cancel, nil, true) {
				pw.Close()
			}
			return
		}
	}
}

// passRequestChunk runs one chunk of the request body through the plugin
// and sends on what it lets through; false when the body goes no further.
func (x *exchange) passRequestChunk(pw *io.PipeWriter, cancel context.CancelFunc, chunk []byte, end bool) bool {
	var out []byte
	var action types.Action
	var local *localReply
	err := x.call(func(h proxytest.HostEmulator) {
		action = h.CallOnRequestBody(x.id, chunk, end)
		local = readLocal(h.GetSentLocalResponse(x.id))
		if action == types.ActionContinue {
			out = bytes.Clone(h.GetCurrentRequestBody(x.id))
		}
	})
	x.sig.broadcast() // a chunk may have continued headers that wait for the body
	if err == nil && local == nil && end && action != types.ActionContinue {
		local, err = x.await("request body")
		if err == nil && local == nil {
			err = x.call(func(h proxytest.HostEmulator) { out = bytes.Clone(h.GetCurrentRequestBody(x.id)) })
		}
	}
	switch {
	case local != nil:
		x.bodyAnswer.Store(&answer{reply: local, by: "plugin"})
	case errors.Is(err, errPauseTimeout):
		x.bodyAnswer.Store(&answer{reply: gatewayReply(http.StatusGatewayTimeout, err.Error()), by: "gateway"})
	case err != nil:
		x.bodyAnswer.Store(&answer{reply: gatewayReply(http.StatusInternalServerError, "gateway: "+err.Error()), by: "gateway"})
	}
	if local != nil || err != nil {
		cancel()
		pw.CloseWithError(errAnsweredLocally)
		return false
	}
	if len(out) > 0 {
		if _, err := pw.Write(out); err != nil {
			return false // the upstream request is over
		}
	}
	return true
}

// forwardResponse runs the upstream's response through the plugin to the
// client: headers, then the body chunk by chunk, each chunk sent on (and
// flushed) as soon as the plugin lets it through.
func (x *exchange) forwardResponse(resp *http.Response) {
	noBody := resp.Body == http.NoBody || resp.ContentLength == 0
	headers := responseHeaders(resp)
	if err := x.call(func(h proxytest.HostEmulator) { h.CallOnResponseHeaders(x.id, headers, noBody) }); err != nil {
		x.crashed(err)
		return
	}
	if !x.proceed("response headers", false) {
		return
	}
	if err := x.call(func(h proxytest.HostEmulator) { headers = cloneHeaders(h.GetCurrentResponseHeaders(x.id)) }); err != nil {
		x.crashed(err)
		return
	}
	status, err := strconv.Atoi(header(headers, ":status"))
	if err != nil || status < 100 || status > 999 {
		status = resp.StatusCode
	}
	x.writeHeader(status, toHTTP(headers), "upstream")
	if noBody {
		x.delivered = true
		return
	}
	x.streamBody(resp.Body)
}

// streamBody passes the response body through the plugin as it arrives,
// the end of the body as an empty last chunk (as Envoy's HTTP/1 codec
// does). When the client goes away it stops: the stream's completion,
// without the rest of the body, is a reset to the plugin. When the
// upstream resets the stream, the client's response is cut off too.
func (x *exchange) streamBody(body io.Reader) {
	buf := make([]byte, chunkSize)
	for {
		n, err := body.Read(buf)
		if err != nil && !errors.Is(err, io.EOF) {
			if x.r.Context().Err() != nil {
				return
			}
			x.g.log.printf("gateway: %s %s: the upstream broke off the response: %v", x.r.Method, x.r.URL.Path, err)
			panic(http.ErrAbortHandler)
		}
		if n > 0 && !x.passResponseChunk(buf[:n], false) {
			return
		}
		if err != nil { // io.EOF
			x.passResponseChunk(nil, true)
			return
		}
	}
}

// passResponseChunk runs one chunk of the response body through the
// plugin and writes what it lets through, flushed; false when the client
// has gone.
func (x *exchange) passResponseChunk(chunk []byte, end bool) bool {
	var out []byte
	var action types.Action
	err := x.call(func(h proxytest.HostEmulator) {
		action = h.CallOnResponseBody(x.id, chunk, end)
		if action == types.ActionContinue {
			out = bytes.Clone(h.GetCurrentResponseBody(x.id))
		}
	})
	if err == nil && end && action != types.ActionContinue {
		var local *localReply
		if local, err = x.await("response body"); err == nil && local == nil {
			err = x.call(func(h proxytest.HostEmulator) { out = bytes.Clone(h.GetCurrentResponseBody(x.id)) })
		} else if local != nil {
			err = errors.New("the plugin answered locally after the response had started")
		}
	}
	if err != nil {
		if errors.Is(err, errClientGone) {
			x.left = true
			return false
		}
		x.g.log.printf("gateway: %s %s: response cut off: %v", x.r.Method, x.r.URL.Path, err)
		panic(http.ErrAbortHandler)
	}
	if len(out) > 0 {
		if _, err := x.w.Write(out); err != nil {
			x.left = true
			return false
		}
		if err := http.NewResponseController(x.w).Flush(); err != nil {
			x.left = true
			return false
		}
		x.wrote(len(out))
	}
	return true
}
