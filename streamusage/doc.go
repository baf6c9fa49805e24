// Package streamusage makes OpenAI chat completions and legacy completions
// streams report their token usage without the client seeing the difference.
//
// A streamed (`"stream": true`) chat completion or completion reports its
// usage only when the request asks for it with
// `"stream_options": {"include_usage": true}`. Most clients do not (it is
// not the default of the official SDKs), so a gateway in front of them would
// never learn what such a stream cost. The plugin therefore:
//
//  1. decides in the request-header phase whether the request may need the
//     rewrite (MayAskForUsage: a POST to a completions path), and
//     then rewrites the body to ask for the usage (AskForUsage), only when
//     the body is a JSON object streaming with `"stream": true` (or a value
//     lax parsers take for true, "true" or 1) and not
//     already asking (a body with duplicate or case-folded stream,
//     stream_options or include_usage keys is rewritten to one
//     `"stream":true` and one `"include_usage":true`, so that every
//     upstream reads it the same way);
//  2. passes the response of a rewritten request through a Filter, which
//     removes the one event the client did not ask for: the usage-only chunk
//     that OpenAI sends just before `data: [DONE]`,
//     `data: {"id":...,"choices":[],"usage":{...}}`. Every other byte reaches
//     the client unchanged and in order. Clients that never asked for it
//     may not expect a chunk without choices (`chunk.choices[0]` is a common
//     line in client code), which is why it is taken out rather than left in.
//
// The usage itself is read by the plugin's usage parser (package
// tokenusage) from the response as the upstream sent it, before the Filter:
// the Filter only decides what the client sees.
//
// What the package deliberately does not do:
//
//   - With include_usage, OpenAI also adds `"usage":null` to every other
//     chunk. Those members pass through untouched: removing them would
//     mean re-encoding every chunk, and clients treat a null usage as no
//     usage (the SDKs' chunk types declare it optional).
//   - It does not know which upstreams accept stream_options. OpenAI and
//     Azure OpenAI (recent API versions) do; some OpenAI-compatible servers
//     reject unknown request fields. That is why the plugin has a
//     `stream_usage: off` option: this package only says what the rewrite
//     is, not where it is welcome.
//   - It never guesses. A body it does not fully understand (invalid JSON,
//     a single stream_options that is neither an object nor null, or whose
//     single include_usage is neither a boolean nor null, a body over
//     MaxBodyBytes) is left untouched, and the upstream sees exactly what
//     the client sent. Duplicate keys are not left to the upstream's
//     reading, since parsers differ on which one counts.
//   - The Filter understands SSE (text/event-stream) as sent, not
//     compressed: a response with a Content-Encoding must not be passed
//     through it (it would hold the stream back until MaxHeldBytes).
//   - The Responses API, Anthropic Messages and Gemini always report usage
//     in their streams, so they need none of this.
//
// Everything here is plain Go without proxy-wasm imports; it runs on every
// such request, compiled to WASM, so it allocates little and never panics.
package streamusage
