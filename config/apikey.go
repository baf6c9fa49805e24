package config

import "strings"

// limit_by_api_key and limit_by_per_api_key read the request's API key
// wherever a client puts it: each official SDK, and each provider's API,
// puts it somewhere else (docs/clients.md lists them). Like
// limit_by_consumer, their value is ignored.

// apiKeyHeaders are the headers an API key travels in, in the order they
// are read: Authorization (Bearer: OpenAI's SDKs, and Anthropic's when
// given an auth token or through some gateways), x-api-key (Anthropic's
// API), api-key (Azure OpenAI), x-goog-api-key (Gemini's SDKs).
var apiKeyHeaders = [...]string{authorizationHeader, "x-api-key", "api-key", "x-goog-api-key"}

// apiKeyParam is the query parameter an API key travels in: Gemini's REST
// API takes it there (?key=).
const apiKeyParam = "key"

// maxAPIKeys bounds the keys one request can carry: one per header, and
// the parameter's first and last values.
const maxAPIKeys = len(apiKeyHeaders) + 2

// APIKeys returns the distinct API keys a request carries, normalised as
// apiKeyValue does, in the order apiKeyHeaders, then the parameter, are
// read. A client that sends one key in two places has one key; one that
// sends two keys has two, and each is limited (an upstream, or the
// gateway's authentication, may read either).
func APIKeys(r Request) (keys [maxAPIKeys]string, n int) {
	add := func(v string) {
		v = apiKeyValue(v)
		for _, k := range keys[:n] {
			if k == v {
				return
			}
		}
		if v != "" {
			keys[n] = v
			n++
		}
	}
	for _, h := range apiKeyHeaders {
		add(r.Header(h))
	}
	if first, last, ok := QueryParam(r.Path(), apiKeyParam); ok {
		add(first)
		add(last)
	}
	return keys, n
}

// apiKeyValue is an API key as the limiter names it: trimmed of the
// whitespace around it and, from Authorization, without the Bearer scheme
// (any spelling), so that the key sent as a Bearer token and in x-api-key
// is one subject. Another scheme stays, respelled as canonicalCredentials
// does ("Basic dXNlcjpwdw=="): it is another credential. A Bearer scheme
// without a token is no key. Idempotent.
func apiKeyValue(v string) string {
	v = canonicalCredentials(trimOWS(v))
	if rest, ok := strings.CutPrefix(v, "Bearer "); ok {
		return rest
	}
	if equalFoldASCII(v, "Bearer") {
		return "" // the scheme without a token
	}
	return v
}
