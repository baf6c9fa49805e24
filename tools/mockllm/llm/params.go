package llm

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request headers that steer the mock.
const (
	HeaderUsage  = "X-Mock-Usage"
	HeaderEvents = "X-Mock-Events"
	HeaderDelay  = "X-Mock-Delay-Ms"
)

// Defaults and bounds of the steering headers.
const (
	DefaultEvents        = 8
	MaxEvents            = 10000
	MaxDelay             = 2000 * time.Millisecond
	DefaultOutputTokens  = 16
	bytesPerInputToken   = 4
	maxTokensInAnyHeader = 1 << 40
)

// Usage is the token usage a response reports. Cached is the part of Input
// read from a prompt cache, CacheWrite the part written to one, Reasoning
// the part of Output spent reasoning. None: the response reports no usage
// at all (x-mock-usage: none), and the counts are not used.
type Usage struct {
	Input, Output, Cached, CacheWrite, Reasoning int
	None                                         bool
}

// Total is what the response costs: every input token plus every output token.
func (u Usage) Total() int { return u.Input + u.Output }

// UsageNone is the x-mock-usage value that asks for a response without usage.
const UsageNone = "none"

// params are what the steering headers ask for.
type params struct {
	usage   Usage
	exact   bool // x-mock-usage was given
	events  int
	delay   time.Duration
	bodyLen int
}

// readParams reads the steering headers; a malformed one is an error the
// client sees, never silently ignored.
func readParams(h http.Header, bodyLen int) (params, error) {
	p := params{events: DefaultEvents, bodyLen: bodyLen}
	if v := h.Get(HeaderUsage); v != "" {
		u, err := ParseUsage(v)
		if err != nil {
			return p, err
		}
		p.usage, p.exact = u, true
	}
	if v := h.Get(HeaderEvents); v != "" {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 1 || n > MaxEvents {
			return p, fmt.Errorf("%s: want a number of events from 1 to %d, got %q", HeaderEvents, MaxEvents, v)
		}
		p.events = n
	}
	if v := h.Get(HeaderDelay); v != "" {
		ms, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || ms < 0 {
			return p, fmt.Errorf("%s: want milliseconds ≥ 0, got %q", HeaderDelay, v)
		}
		p.delay = min(time.Duration(ms)*time.Millisecond, MaxDelay)
	}
	return p, nil
}

// ParseUsage parses an x-mock-usage value:
// "<input>,<output>[,<cached>[,<cache_write>[,<reasoning>]]]", with cached +
// cache_write ≤ input and reasoning ≤ output, or "none".
func ParseUsage(v string) (Usage, error) {
	if strings.EqualFold(strings.TrimSpace(v), UsageNone) {
		return Usage{None: true}, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) < 2 || len(parts) > 5 {
		return Usage{}, fmt.Errorf("%s: want <input>,<output>[,<cached>[,<cache_write>[,<reasoning>]]] or %s, got %q", HeaderUsage, UsageNone, v)
	}
	var n [5]int
	for i, part := range parts {
		x, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || x < 0 || x > maxTokensInAnyHeader {
			return Usage{}, fmt.Errorf("%s: %q is not a token count", HeaderUsage, part)
		}
		n[i] = x
	}
	u := Usage{Input: n[0], Output: n[1], Cached: n[2], CacheWrite: n[3], Reasoning: n[4]}
	if u.Cached+u.CacheWrite > u.Input {
		if u.CacheWrite == 0 {
			return Usage{}, fmt.Errorf("%s: %d cached tokens out of %d input tokens", HeaderUsage, u.Cached, u.Input)
		}
		return Usage{}, fmt.Errorf("%s: %d cached + %d cache-write tokens out of %d input tokens", HeaderUsage, u.Cached, u.CacheWrite, u.Input)
	}
	if u.Reasoning > u.Output {
		return Usage{}, fmt.Errorf("%s: %d reasoning tokens out of %d output tokens", HeaderUsage, u.Reasoning, u.Output)
	}
	return u, nil
}

// tokens is the usage to report: the asked one, or the body's size in
// tokens and the request's output cap (0: none given).
func (p params) tokens(outputCap int) Usage {
	if p.exact {
		return p.usage
	}
	out := outputCap
	if out <= 0 {
		out = DefaultOutputTokens
	}
	return Usage{Input: p.bodyLen / bytesPerInputToken, Output: out}
}

// pause waits n delays; false when the client went away meanwhile.
func (p params) pause(r *http.Request, n int) bool {
	if p.delay <= 0 || n <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(time.Duration(n) * p.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
