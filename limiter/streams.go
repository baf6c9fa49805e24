package limiter

import (
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/streamusage"
)

// stream_usage: inject. An OpenAI chat completions or legacy completions
// stream reports its usage only when the request asks for it
// (stream_options.include_usage), which most clients do not. The limiter
// rewrites such a request to ask (streamusage.AskForUsage), reads the usage
// from the response as the upstream sent it, and passes the response to
// the client through a streamusage.Filter, which takes the usage-only chunk
// the client did not ask for back out.
//
// The body is read for this even when nothing else needs it (no
// token_reservation, no per-model weights), but then admission does not
// wait for it: it happens at the headers as before, and the body is only
// rewritten on its way.

// mayAskForUsage decides, at the headers of a request with a readable body
// (bodies.go), whether its body is to be read to ask for the stream's
// usage: stream_usage is inject, it is a POST to a completions path (of
// any Content-Type: the body decides), and it declares no more than
// streamusage.MaxBodyBytes (a larger one would not be rewritten anyway). The body may grow, so its Content-Length is
// removed when declared says it has one (declaredSize is what it said).
func (r *request) mayAskForUsage(ctx wrapper.HttpContext, declaredSize int64, declared bool) bool {
	if r.pc.rules.StreamUsage != config.StreamUsageInject || declaredSize > streamusage.MaxBodyBytes {
		return false
	}
	r.routedPath = config.CanonicalPath(r.path)
	if !streamusage.MayAskForUsage(ctx.Method(), r.routedPath) {
		return false
	}
	if declared { // (a chunked request has none to remove: no host call)
		_ = proxywasm.RemoveHttpRequestHeader("content-length")
	}
	return true
}

// askForUsage rewrites the request body to ask for the stream's usage when
// it streams without asking (see streamusage.AskForUsage), and notes it; it
// returns the body that goes upstream.
func (r *request) askForUsage(body []byte) []byte {
	rewritten, ok := streamusage.AskForUsage(r.routedPath, body)
	if !ok {
		return body
	}
	if err := proxywasm.ReplaceHttpRequestBody(rewritten); err != nil {
		log.Warnf("asking the stream for its usage: replacing the request body failed: %v", err)
		return body
	}
	r.injected = true
	r.pc.start.injected++ // counted from the tick: see metricInjected
	if debugEnabled() {
		log.Debug("the stream did not ask for its usage: asked for it (stream_options.include_usage)")
	}
	return rewritten
}

// filterResponse decides, at the response's headers, whether the response
// (in the given Content-Encoding) of a request whose body was rewritten
// goes through a Filter: only an uncompressed server-sent event stream (an
// error answer in JSON has no usage chunk, and a compressed one cannot be
// read). The filtered body is shorter, so its Content-Length is removed.
func (r *request) filterResponse(encoding string) {
	if !r.injected || encoding != "" {
		return
	}
	if !isEventStream(responseHeader("content-type")) {
		return
	}
	_ = proxywasm.RemoveHttpResponseHeader("content-length")
	r.filter = &streamusage.Filter{}
}

// isEventStream reports whether a Content-Type is text/event-stream, with
// any parameters, in any case.
func isEventStream(contentType string) bool {
	mediaType, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mediaType), "text/event-stream")
}
