package limiter

import "github.com/tokenlimit/ai-token-ratelimit/tokenusage"

// A usage parser is 1.1 KiB of state (its lexer's levels, the memo of the
// last data line) that a request needs only while its response streams. A
// request takes one at its first response chunk and gives it back once
// settled, so a request waiting for Redis or its upstream keeps a third of
// the heap it would, and the parsers of finished requests are reused, not
// collected. The plugin runs on one thread (a gateway worker's VM), as the
// rest of its request state does.

// idleParsers are the parsers of settled requests, ready for the next.
var idleParsers []*tokenusage.Parser

// maxIdleParsers bounds what the pool keeps after a burst of streams.
const maxIdleParsers = 64

// takeParser returns a reset parser.
func takeParser() *tokenusage.Parser {
	if n := len(idleParsers); n > 0 {
		p := idleParsers[n-1]
		idleParsers[n-1] = nil
		idleParsers = idleParsers[:n-1]
		return p
	}
	return new(tokenusage.Parser)
}

// releaseParser gives a settled request's parser back: nothing reads it
// once the request is settled.
func (rs *response) releaseParser() {
	p := rs.usage
	if p == nil {
		return
	}
	rs.usage = nil
	if len(idleParsers) < maxIdleParsers {
		p.Reset()
		idleParsers = append(idleParsers, p)
	}
}
