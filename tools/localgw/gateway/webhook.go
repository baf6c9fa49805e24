package gateway

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
)

// The plugin's HTTP calls (its budget alerts' POSTs to budget_alerts.webhook)
// go where Options.Webhook says: to that base URL, path and body as the
// plugin sent them; or, without one, to the gateway itself, which prints
// each and answers 204, so that `make run` shows its alerts. Either way an
// alert is one line: what it is and where it went. Envoy would
// send them to the cluster the plugin names (outbound|<port>||<service>);
// here every cluster is the one address.

// webhookTimeout bounds an HTTP call when the plugin gives none the host
// can see (the emulator keeps no timeout): a receiver that hangs is a
// failed call, which the plugin tries again.
const webhookTimeout = 5 * time.Second

// sendHTTPCalls sends the HTTP calls of a context not sent yet. What the
// plugin sent lives in its memory, so it is copied now, under mu.
func (v *vm) sendHTTPCalls(contextID uint32) {
	for _, call := range v.host.GetCalloutAttributesFromContext(contextID) {
		if v.httpSent[call.CalloutID] {
			continue
		}
		v.httpSent[call.CalloutID] = true
		v.calls.Add(1)
		call.Headers = append([][2]string(nil), call.Headers...)
		call.Body = bytes.Clone(call.Body)
		go v.post(contextID, call)
	}
}

// post makes one HTTP call and hands its answer (or a failure: no
// headers) to the plugin.
func (v *vm) post(contextID uint32, call proxytest.HttpCalloutAttribute) {
	defer v.calls.Done()
	status, body := v.deliver(call)
	var headers [][2]string
	if status > 0 {
		headers = [][2]string{{":status", strconv.Itoa(status)}}
	}
	_ = v.do(contextID, func(h proxytest.HostEmulator) {
		delete(v.httpSent, call.CalloutID)
		h.CallOnHttpCallResponse(call.CalloutID, headers, nil, body)
	})
	v.wake(contextID)
}

// deliver sends a call to the webhook, or prints it; it returns the status
// (0: no answer) and the body. Each call is one line, saying the alert and
// where it went: the webhook's URL and its answer, or the failure; the
// plugin's own line about the alert is left out (logWriter.Write).
func (v *vm) deliver(call proxytest.HttpCalloutAttribute) (int, []byte) {
	path := header(call.Headers, ":path")
	if v.webhook == "" {
		v.log.printf("gateway: budget alert → printed here, not sent (no -webhook; the plugin POSTs it to %s on %s): %s",
			path, call.Upstream, call.Body)
		return http.StatusNoContent, nil
	}
	url := strings.TrimSuffix(v.webhook, "/") + path
	method := header(call.Headers, ":method")
	ctx, cancel := context.WithTimeout(context.Background(), webhookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(call.Body))
	if err != nil {
		v.log.printf("gateway: budget alert → %s %s: not sent (%v): %s", method, url, err, call.Body)
		return 0, nil
	}
	for _, h := range call.Headers {
		if !strings.HasPrefix(h[0], ":") {
			req.Header.Add(h[0], h[1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		v.log.printf("gateway: budget alert → %s %s: failed (%v), the plugin tries it again: %s", method, url, err, call.Body)
		return 0, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	again := ""
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		again = ", the plugin tries it again"
	}
	v.log.printf("gateway: budget alert → %s %s: %s%s: %s", method, url, resp.Status, again, call.Body)
	return resp.StatusCode, body
}
