package limiter

import (
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// Which bodies the limiter reads (host.go explains why it reads them itself
// rather than through the wrapper's body hooks).
//
// A request body is read when its cost or model is needed before admission
// (token_reservation, per-model weights) or when it is to be rewritten to
// ask a stream for its usage (streams.go), whatever its Content-Type says:
// a client chooses that header, and the upstream reads JSON all the same.
// Two kinds of body are not read, and the request is estimated by its
// declared size, and at the end by the bytes that passed (a body without a
// Content-Length is not free): one compressed in a coding the limiter does
// not decompress (it reads gzip and deflate decompressed: ambiguity.go),
// whose model is then unknown, and the stream a WebSocket handshake opens
// (a GET or CONNECT asking to upgrade), which never ends.
// A body ends with the end of the stream or with trailers.
//
// Only token_reservation reserves what a body is estimated to cost. Without
// it, a body read before admission (for its model: per-model limits,
// weights or prices, fallbacks) is read for its model alone, and a
// compressed body on a route whose responses are charged their usage is
// kept for its decompressed size, inflated only if its response reports no
// usage (keepCompressed): a prompt is then charged by its size.
//
// A response body is read when its request was admitted (its usage is
// charged) or its usage-only chunk is to be taken out, unless it is
// compressed (charged as a response without usage, see settle) or the
// upstream switched protocols (101): every other answer to a request that
// asked to upgrade is a plain response, read and charged like any other.

// bodyCoding returns the request body's content coding when the limiter
// decompresses it to read it ("": none), and whether the body, if any, can
// be read: not compressed in another coding (see ambiguity.go), and not the
// stream of a WebSocket handshake.
func bodyCoding(ctx wrapper.HttpContext) (coding string, readable bool) {
	if !ctx.HasRequestBody() || opensWebSocket(ctx) {
		return "", false
	}
	if !ctx.IsBinaryRequestBody() {
		return "", true // the wrapper read the headers: no Content-Encoding (the common case, without a host call)
	}
	encoding := requestHeader("content-encoding")
	if !compressed(encoding) {
		return "", true
	}
	coding = decompressible(encoding)
	return coding, coding != ""
}

// compressed says whether a Content-Encoding makes a body unreadable: any
// coding but identity.
func compressed(contentEncoding string) bool {
	if contentEncoding == "" {
		return false // the common case, without the split's allocation
	}
	for _, coding := range strings.Split(contentEncoding, ",") {
		if c := strings.TrimSpace(coding); c != "" && !strings.EqualFold(c, "identity") {
			return true
		}
	}
	return false
}

// undecodable says whether the request has a body in a content coding the
// limiter does not decode, from what bodyCoding said (readable): a body
// is unreadable for that, or because there is none, or a WebSocket's.
func undecodable(ctx wrapper.HttpContext, readable bool) bool {
	return !readable && ctx.HasRequestBody() && !opensWebSocket(ctx)
}

// rejectCompressed answers a request whose body the limiter cannot
// decode 415 (compressed_body: reject), naming what it reads.
func rejectCompressed() types.Action {
	log.Infof("request rejected with 415: %s", unreadableCoding)
	body := []byte(`{"error":{"message":"unsupported request body: ` + unreadableCoding +
		`; send it uncompressed, or in gzip or deflate","type":"invalid_request_error","code":"unsupported_content_encoding"}}`)
	_ = proxywasm.SendHttpResponseWithDetail(415, "ai-token-ratelimit.compressed_body",
		[][2]string{{"content-type", contentTypeJSON}, {"accept-encoding", "gzip, deflate"}}, body, -1)
	return types.ActionPause
}

// opensWebSocket says whether the request is a WebSocket handshake: an
// HTTP/1.1 GET with Connection: upgrade and Upgrade: websocket, or an
// HTTP/2 extended CONNECT (which the wrapper reports the same way). A POST
// that carries those headers is not one: no server upgrades it.
func opensWebSocket(ctx wrapper.HttpContext) bool {
	method := ctx.Method()
	return ctx.IsWebsocket() && (method == "GET" || method == "CONNECT")
}

// bodyEnded takes the whole request body (nil: none came) of a request that
// reads it: estimates its cost and admits it, asking a stream for its usage
// on the way. A body read only to ask for the usage is rewritten and goes
// on: its request was admitted at the headers (or waits for Redis with
// them).
func (r *request) bodyEnded(ctx wrapper.HttpContext, body []byte) types.Action {
	r.readDuringAdmission = false
	if r.phase == phaseMatching {
		return r.matchWithBody(ctx, body)
	}
	if !r.pc.needsBody() {
		switch {
		case r.coding != "":
			// Read for its decompressed size, which only a response
			// without usage is charged by: kept, and inflated then
			// (keepCompressed). It goes on as it came, and its stream is
			// not asked for usage.
			r.keepCompressed(body, r.pc.rules)
			r.promptBySize = false
		case r.mayInject:
			// Read after all: the prompt is estimated by the body's size.
			r.promptEstimate = estimate.PromptOfSize(int64(len(body)), r.pc.rules.EstimateOptions)
			r.promptBySize = false
			r.askForUsage(body)
		}
		if r.phase.undecided() {
			return types.ActionPause // Redis has not decided: the body waits with the headers
		}
		return types.ActionContinue
	}
	e := r.readBody(body, r.pc.rules.EstimateOptions)
	if e.Ambiguous != "" {
		if action, rejected := r.pc.ambiguous(e, r.servedModel()); rejected {
			return action
		}
	}
	r.modelOfBody(ctx, &e)
	return r.admitWithBody(ctx, body, e, r.cost(e))
}

// admitWithBody admits a request whose body was read before admission,
// asking a stream for its usage on the way; the body waits with the request
// while Redis decides.
func (r *request) admitWithBody(ctx wrapper.HttpContext, body []byte, e estimate.Estimate, cost budget.Amounts) types.Action {
	if r.mayInject {
		body = r.askForUsage(body)
	}
	r.offerFallbacks(ctx, body, e, cost)
	if r.admit(cost) == types.ActionContinue {
		return types.ActionContinue
	}
	return types.ActionPause
}

// matchWithBody matches a request whose model is in its body (models.go),
// then admits it like bodyEnded: the body is parsed once, for its model and
// its estimate. A request no rule applies to goes on untouched.
func (r *request) matchWithBody(ctx wrapper.HttpContext, body []byte) types.Action {
	opts := r.pc.rules.EstimateOptions
	opts.ModelOfLargeBodies = true // the model decides which limits apply
	e := r.readBody(body, opts)
	model := r.model // as the headers left it: its route read
	r.pc.resolveModel(ctx, &model, r.path, &e, false)
	if model.name != e.Model {
		e.Prompt = e.PromptFor(model.name) // as the model's family counts it (the body's model's is the estimate's)
	}
	matches := r.pc.matchRequest(ctx, model.name, model.others)
	r.pc.noteUnmatched(ctx, model.name, matches)
	if len(matches) == 0 {
		setCurrentRequest(nil)
		return types.ActionContinue
	}
	if e.Ambiguous != "" {
		if action, rejected := r.pc.ambiguous(e, r.servedModel()); rejected {
			return action
		}
	}
	r.model = model
	r.limitBy(ctx, matches)
	var cost budget.Amounts
	if r.pc.rules.Reservation.Enabled {
		cost = r.cost(e)
	} else {
		r.promptEstimate = e.Prompt
	}
	return r.admitWithBody(ctx, body, e, cost)
}

// readResponse decides, at the response's headers, whether its body (in
// the given Content-Encoding) is read.
func (r *request) readResponse(encoding string) {
	r.readsResponse = (r.phase == phaseAdmitted || r.filter != nil) && r.status != 101 && !compressed(encoding)
}

// responseChunk reads the usage from a response chunk as it streams, as the
// upstream sent it; the chunk itself goes on undelayed and unchanged, except
// in a filtered response (streams.go), which loses its usage-only chunk and
// holds an event cut across chunks back until its end: changed says the
// chunk is to be replaced by out (a host call and a copy, saved for the
// chunks a filter passes whole). The last chunk may be held until its
// charges are answered (charges.go): the host keeps it, replaced, until
// then.
//
// A filter removes the usage chunk whose usage the parser read (one
// reading of the stream: what is charged is what the client does not get),
// so a chunk of whole events in which the parser came upon no usage object
// passes without the filter looking into it.
func (r *request) responseChunk(chunk []byte, last bool) (out []byte, changed bool) {
	noUsage := false
	if r.phase == phaseAdmitted {
		if r.usage == nil {
			r.usage = takeParser()
		}
		seen := r.usage.UsageObjects()
		r.usage.Write(chunk)
		noUsage = r.usage.UsageObjects() == seen
		if last {
			r.settleAtEnd()
		}
	}
	if r.filter == nil || noUsage && r.filter.Passes(chunk) {
		return chunk, false
	}
	out = r.filter.Write(chunk, last)
	return out, !sameBytes(out, chunk)
}

// sameBytes says whether out is chunk itself, as a Filter returns a chunk
// it passes whole: then the host keeps the chunk it has.
func sameBytes(out, chunk []byte) bool {
	return len(out) == len(chunk) && (len(out) == 0 || &out[0] == &chunk[0])
}

// responseTrailers ends a response that ends with trailers as its last
// chunk would. A filter holding the start of an event cut off by them has
// nowhere to put it: the event was incomplete anyway.
func (r *request) responseTrailers() {
	if r.phase == phaseAdmitted {
		r.settleAtEnd()
	}
	if r.filter != nil {
		if rest := r.filter.Write(nil, true); len(rest) > 0 {
			log.Debugf("the response ended with trailers in the middle of an event: %d bytes dropped", len(rest))
		}
	}
}

// settleAtEnd settles a response from the hook of its end (its last chunk,
// or its trailers), whose charges may hold that end (charges.go).
func (r *request) settleAtEnd() {
	r.phase.enter(phaseSettling)
	r.settle(true)
	r.phase.enter(phaseSettled)
}
