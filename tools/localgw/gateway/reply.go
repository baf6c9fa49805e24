package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
)

var (
	errClientGone      = errors.New("the client went away")
	errAnsweredLocally = errors.New("the plugin answered the request itself")
)

// localReply is a response given in the upstream's place.
type localReply struct {
	status  int
	headers [][2]string
	body    []byte
}

// answer is a local reply and who gave it.
type answer struct {
	reply *localReply
	by    string
}

// gatewayReply is an error the gateway answers itself, as Envoy's router does.
func gatewayReply(status int, msg string) *localReply {
	return &localReply{status: status, headers: [][2]string{{"content-type", "text/plain; charset=utf-8"}}, body: []byte(msg)}
}

// readLocal copies the local response the plugin sent, if any: its body
// lives in the plugin's memory.
func readLocal(l *proxytest.LocalHttpResponse) *localReply {
	if l == nil {
		return nil
	}
	return &localReply{status: int(l.StatusCode), headers: cloneHeaders(l.Headers), body: bytes.Clone(l.Data)}
}

// proceed waits for a paused phase to continue; false when the request has
// been answered instead (by the plugin, or the gateway's 504 or 500) or the
// client went away. throughHooks says whether a reply goes through the
// plugin's response hooks, as Envoy's local replies during the request do.
func (x *exchange) proceed(phase string, throughHooks bool) bool {
	local, err := x.await(phase)
	switch {
	case local != nil:
		x.reply(local, "plugin", throughHooks)
	case errors.Is(err, errPauseTimeout):
		x.reply(gatewayReply(http.StatusGatewayTimeout, err.Error()), "gateway", throughHooks)
	case errors.Is(err, errClientGone):
		x.left = true
	case err != nil:
		x.crashed(err)
	default:
		return true
	}
	return false
}

// errPauseTimeout: the plugin kept the stream paused longer than PauseTimeout.
var errPauseTimeout = errors.New("the plugin did not resume the stream")

// await waits until the plugin continues the stream (nil, nil) or answers
// it (the reply), the pause times out, the client goes away, or the plugin
// cannot be called.
func (x *exchange) await(phase string) (*localReply, error) {
	timeout := time.NewTimer(x.g.pause)
	defer timeout.Stop()
	for {
		wake := x.sig.wait()
		var local *localReply
		var action types.Action
		err := x.call(func(h proxytest.HostEmulator) {
			local = readLocal(h.GetSentLocalResponse(x.id))
			action = h.GetCurrentHttpStreamAction(x.id)
		})
		if err != nil || local != nil {
			return local, err
		}
		if action == types.ActionContinue {
			return nil, nil
		}
		select {
		case <-wake:
		case <-timeout.C:
			return nil, fmt.Errorf("%w: it paused the %s and did not resume it within %v", errPauseTimeout, phase, x.g.pause)
		case <-x.r.Context().Done():
			return nil, errClientGone
		}
	}
}

// reply answers a local reply. Through the hooks, the plugin sees its
// headers and body as it would any response and may change them.
func (x *exchange) reply(l *localReply, by string, throughHooks bool) {
	if x.wroteHeader {
		return
	}
	headers := append([][2]string{{":status", strconv.Itoa(l.status)}}, l.headers...)
	body := l.body
	if throughHooks {
		_ = x.call(func(h proxytest.HostEmulator) {
			h.CallOnResponseHeaders(x.id, headers, len(body) == 0)
			if len(body) > 0 && h.CallOnResponseBody(x.id, body, true) == types.ActionContinue {
				body = bytes.Clone(h.GetCurrentResponseBody(x.id))
			}
			headers = cloneHeaders(h.GetCurrentResponseHeaders(x.id))
		})
	}
	status, err := strconv.Atoi(header(headers, ":status"))
	if err != nil || status < 100 || status > 999 {
		status = l.status
	}
	hdr := toHTTP(headers, "content-length")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	x.writeHeader(status, hdr, by)
	if n, err := x.w.Write(body); err != nil {
		x.left = true
	} else {
		x.wrote(n)
	}
}

// crashed answers 500 when the plugin cannot be called (it crashed, or the
// gateway is closing), if nothing has been answered yet.
func (x *exchange) crashed(err error) {
	if x.wroteHeader || errors.Is(err, errCompleted) {
		return
	}
	x.writeHeader(http.StatusInternalServerError, http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, "gateway")
	_, _ = io.WriteString(x.w, "gateway: "+err.Error()+"\n")
}

// writeHeader sends the response status and headers, flushed so that a
// streaming client sees them at once.
func (x *exchange) writeHeader(status int, h http.Header, by string) {
	dst := x.w.Header()
	for name, values := range h {
		dst[name] = values
	}
	x.w.WriteHeader(status)
	_ = http.NewResponseController(x.w).Flush()
	x.wroteHeader, x.status, x.by = true, status, by
	x.length = -1
	if n, err := strconv.ParseInt(dst.Get("Content-Length"), 10, 64); err == nil && n >= 0 {
		x.length = n
		x.wrote(0) // Content-Length: 0 is all of it
	}
}
