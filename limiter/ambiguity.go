package limiter

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"encoding/json"
	"errors"
	"io"
	"strings"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// One request, one reading. The limiter reads a request body (for its
// model, its cost) the way its upstream will, and where common parsers
// read it differently (package estimate says which bodies), the body is
// ambiguous: under ambiguous_body: strictest (the default) the request is
// limited and priced at its most expensive reading, counting as every
// model it may name (matchRequest, tokens), or as config.UnknownModel when
// that cannot be told; under ambiguous_body: reject it is answered 400.
//
// A compressed body is read decompressed (gzip, x-gzip and deflate, at
// most token_reservation.max_body_bytes of it): an upstream, or a
// decompressor after this filter, reads it so. Inflating is bounded by
// that size, as reading any body is: a body that inflates past it is
// estimated by what its whole would be at the rate it inflated so far (a
// 16 KB bomb is not inflated to 16 MiB before admission), and its model,
// which the part read may not name, is unknown. A body in another coding
// (br, zstd, several), or one that does not decompress, cannot be read:
// its model is unknown, and it is estimated at the bound (see
// unreadSize), or refused with compressed_body: reject.

// metricAmbiguous counts requests whose body parsers read differently:
// limited at their most expensive reading, or rejected.
const metricAmbiguous = "token_ratelimit_ambiguous_body_count"

// unreadableCoding is why a body in a coding the limiter does not read is
// ambiguous.
const unreadableCoding = "the body is compressed in a content coding the limiter does not read (it reads gzip and deflate)"

// decompressible returns the coding a Content-Encoding names when the
// limiter decompresses it: gzip (or x-gzip) or deflate, alone; "" for any
// other, and for several codings.
func decompressible(contentEncoding string) string {
	switch c := strings.ToLower(strings.TrimSpace(contentEncoding)); c {
	case "gzip", "x-gzip":
		return "gzip"
	case "deflate":
		return c
	}
	return ""
}

// errTooLarge says a compressed body decompresses to more than the bound
// it is read to.
var errTooLarge = errors.New("it decompresses to more than max_body_bytes")

// decompress returns a body decompressed, a gzip stream (members read one
// after another) or a deflate one (zlib-wrapped as HTTP says, or raw as
// some clients send it), and the size its whole decompresses to: at most
// limit bytes are inflated; past them (errTooLarge), the size is what the
// whole would be at the rate the bytes read so far inflated.
func decompress(coding string, body []byte, limit int64) (plain []byte, size int64, err error) {
	return inflate(coding, body, limit, true)
}

// inflate is decompress, keeping the bytes inflated only with keep: else
// they are counted, a buffer at a time, and plain is nil.
func inflate(coding string, body []byte, limit int64, keep bool) (plain []byte, size int64, err error) {
	in := &countingReader{r: bytes.NewReader(body)}
	var src io.Reader
	switch coding {
	case "gzip":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return nil, 0, err
		}
		src = zr
	case "deflate":
		zr, err := zlib.NewReader(in)
		if err != nil {
			in = &countingReader{r: bytes.NewReader(body)}
			src = flate.NewReader(in) // raw deflate
		} else {
			src = zr
		}
	default:
		return nil, 0, errors.New("unknown coding " + coding)
	}
	if keep {
		plain, err = io.ReadAll(io.LimitReader(src, limit+1))
		size = int64(len(plain))
	} else {
		size, err = io.Copy(io.Discard, io.LimitReader(src, limit+1))
	}
	if err == nil && size > limit {
		// Inflated in proportion: size from in.n of len(body) bytes.
		if keep {
			plain = plain[:limit]
		}
		return plain, extrapolate(size, in.n, int64(len(body))), errTooLarge
	}
	return plain, size, err
}

// maxKeptCompressed bounds the compressed body keepCompressed keeps for a
// response without usage: a larger one is inflated at once (its inflating
// costs at most max_body_bytes ÷ maxKeptCompressed bytes for each of its
// own), and not kept for the length of its response.
const maxKeptCompressed = 64 << 10

// keepCompressed takes a compressed body read only for its decompressed
// size: a response without usage is charged its prompt by it (estimated),
// the only one that needs it. A small body is kept for then (a 1.6 KB
// gzip bomb of 1 MiB costs nothing while its responses report their
// usage); a larger one is counted now.
func (b *requestBody) keepCompressed(body []byte, rules *config.Config) {
	if len(body) <= maxKeptCompressed {
		b.compressed = body
		return
	}
	b.promptEstimate = estimate.PromptOfSize(b.inflatedSize(body, rules.Reservation.MaxBodyBytes), rules.EstimateOptions)
}

// inflatedSize is the size a compressed body decompresses to, counted
// without keeping it, at most maxBytes (max_body_bytes) inflated, as readBody reads it
// (past them, what its whole would be at the rate it inflated so far); a
// body that does not decompress counts the larger of its size and what did.
func (b *requestBody) inflatedSize(body []byte, maxBytes int64) int64 {
	_, size, err := inflate(b.coding, body, maxBytes, false)
	if err != nil && !errors.Is(err, errTooLarge) {
		return max(int64(len(body)), size)
	}
	return size
}

// extrapolate is what whole compressed bytes inflate to when read of them
// inflated to plain: plain × whole ÷ read, bounded so as not to overflow
// (estimate.Size bounds it again, in tokens).
func extrapolate(plain, read, whole int64) int64 {
	if read <= 0 || whole <= read {
		return plain
	}
	const most = 1 << 50
	ratio := float64(plain) / float64(read)
	return int64(min(ratio*float64(whole), most))
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bytes.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

// readBody estimates the body the request read, decompressed first when
// it is compressed, as the API its route speaks reads it. A body that does
// not decompress is estimated by the larger of its size and what did
// decompress, with an unknown model (but on a Gemini route, whose path
// names it).
func (r *request) readBody(body []byte, opts estimate.Options) estimate.Estimate {
	route := r.model.routeOf(r.pc.rules, r.path)
	if r.coding == "" || len(body) == 0 {
		return estimate.Request(body, estimate.RouteDialect(r.path, route.Gemini), opts)
	}
	plain, size, err := decompress(r.coding, body, r.pc.rules.Reservation.MaxBodyBytes)
	switch {
	case errors.Is(err, errTooLarge): // too large to read: by its size, as a large plain body
		e := estimate.Size(size, opts)
		e.UnknownModel = !route.Gemini
		return e
	case err != nil:
		e := estimate.Size(max(int64(len(body)), size), opts)
		e.UnknownModel = !route.Gemini
		e.Ambiguous = "the body's " + r.coding + " coding cannot be read: " + err.Error()
		return e
	}
	return estimate.Request(plain, estimate.RouteDialect(r.path, route.Gemini), opts)
}

// unreadBody estimates a body that is not read, of a request for model
// to path, by its size (unreadSize); a
// compressed one (in a coding the limiter does not decode) may name a
// model, which cannot be told (but on a Gemini route, whose path names
// it).
func (pc PluginConfig) unreadBody(model *requestModel, path string, declared int64) estimate.Estimate {
	size, isCompressed := unreadSize(declared, pc.rules.Reservation.MaxBodyBytes)
	e := estimate.Size(size, pc.rules.EstimateOptions)
	if isCompressed && !model.routeOf(pc.rules, path).Gemini {
		e.UnknownModel, e.Ambiguous = true, unreadableCoding
	}
	return e
}

// unreadSize is the size a body that is not read is estimated by: its
// declared size; a compressed one's (in a coding the limiter does not
// decode) at the bound of what it reads (max_body_bytes) at the least, as
// large as it may inflate to.
func unreadSize(declared, bound int64) (size int64, isCompressed bool) {
	if !compressed(requestHeader("content-encoding")) {
		return declared, false
	}
	return max(declared, bound), true
}

// ambiguous takes a request (for model) whose body parsers read
// differently: counts it, and under ambiguous_body: reject answers 400
// (rejected true: the hook returns action).
func (pc PluginConfig) ambiguous(e estimate.Estimate, model string) (action types.Action, rejected bool) {
	pc.metrics.count(metricAmbiguous, requestHeader(consumerHeader), model)
	if pc.rules.AmbiguousBody != config.AmbiguousReject {
		if debugEnabled() {
			log.Debugf("ambiguous request body (%s): limited at its most expensive reading", e.Ambiguous)
		}
		return 0, false
	}
	setCurrentRequest(nil)
	return rejectAmbiguous(pc, e.Ambiguous), true
}

// rejectAmbiguous answers 400 to a request whose body parsers read
// differently, saying why, in the error shape of OpenAI's API (which the
// other SDKs show as text).
func rejectAmbiguous(pc PluginConfig, why string) types.Action {
	log.Infof("request rejected with 400: ambiguous request body: %s", why)
	msg, _ := json.Marshal("ambiguous request body: " + why + "; send strict JSON (RFC 8259) with each key once")
	body := []byte(`{"error":{"message":` + string(msg) + `,"type":"invalid_request_error","code":"ambiguous_body"}}`)
	_ = proxywasm.SendHttpResponseWithDetail(400, "ai-token-ratelimit.ambiguous_body",
		[][2]string{{"content-type", contentTypeJSON}}, body, -1)
	return types.ActionPause
}
