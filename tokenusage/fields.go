package tokenusage

import (
	"unsafe"

	"github.com/tidwall/gjson"
)

// family is a set of providers sharing the names and meaning of their usage
// fields. It is recognised from the field names of a usage object.
type family uint8

const (
	noFamily family = iota
	// OpenAI chat/completions: prompt_tokens, completion_tokens.
	chatFamily
	// Anthropic Messages and the OpenAI Responses API: input_tokens,
	// output_tokens. They differ only in their cache fields, which never
	// occur together, so one normalisation serves both.
	inputOutputFamily
	// Gemini usageMetadata: promptTokenCount, candidatesTokenCount, ...
	geminiFamily
)

// field is a raw usage field as the provider names it.
type field uint8

const (
	promptTokens       field = iota // chat
	completionTokens                // chat
	promptCachedTokens              // chat: prompt_tokens_details.cached_tokens

	inputTokens              // Anthropic and Responses
	outputTokens             // Anthropic and Responses
	cacheCreationInputTokens // Anthropic, excluded from input_tokens
	cacheReadInputTokens     // Anthropic, excluded from input_tokens
	inputCachedTokens        // Responses: input_tokens_details.cached_tokens, included in input_tokens

	promptTokenCount        // Gemini, cached tokens included
	toolUsePromptTokenCount // Gemini
	candidatesTokenCount    // Gemini
	thoughtsTokenCount      // Gemini
	cachedContentTokenCount // Gemini

	numFields
)

var familyOf = [numFields]family{
	promptTokens:             chatFamily,
	completionTokens:         chatFamily,
	promptCachedTokens:       chatFamily,
	inputTokens:              inputOutputFamily,
	outputTokens:             inputOutputFamily,
	cacheCreationInputTokens: inputOutputFamily,
	cacheReadInputTokens:     inputOutputFamily,
	inputCachedTokens:        inputOutputFamily,
	promptTokenCount:         geminiFamily,
	toolUsePromptTokenCount:  geminiFamily,
	candidatesTokenCount:     geminiFamily,
	thoughtsTokenCount:       geminiFamily,
	cachedContentTokenCount:  geminiFamily,
}

// rawUsage holds the latest value of every raw field seen in one response.
type rawUsage struct {
	family family
	values [numFields]int64
}

// apply records the fields of one usage object, a later value overriding an
// earlier one field by field. A malformed object is ignored as a whole rather
// than read with gjson's leniency.
func (r *rawUsage) apply(obj []byte) {
	json := stringView(obj)
	if !gjson.Valid(json) {
		return
	}
	gjson.Parse(json).ForEach(func(key, value gjson.Result) bool {
		switch key.Str {
		case "prompt_tokens":
			r.set(promptTokens, value)
		case "completion_tokens":
			r.set(completionTokens, value)
		case "prompt_tokens_details":
			r.set(promptCachedTokens, value.Get("cached_tokens"))
		case "input_tokens":
			r.set(inputTokens, value)
		case "output_tokens":
			r.set(outputTokens, value)
		case "cache_creation_input_tokens":
			r.set(cacheCreationInputTokens, value)
		case "cache_read_input_tokens":
			r.set(cacheReadInputTokens, value)
		case "input_tokens_details":
			r.set(inputCachedTokens, value.Get("cached_tokens"))
		case "promptTokenCount":
			r.set(promptTokenCount, value)
		case "toolUsePromptTokenCount":
			r.set(toolUsePromptTokenCount, value)
		case "candidatesTokenCount":
			r.set(candidatesTokenCount, value)
		case "thoughtsTokenCount":
			r.set(thoughtsTokenCount, value)
		case "cachedContentTokenCount":
			r.set(cachedContentTokenCount, value)
		}
		return true
	})
}

// maxCount bounds the numbers accepted as token counts: far beyond any real
// count, exactly representable as a float64, and small enough that summing a
// few of them cannot overflow.
const maxCount = 1 << 53

// set records a field when value is a number in [0, maxCount]; null, absent or
// malformed values leave the earlier value in place. A field of another
// family than the one seen so far starts over: one response speaks one
// dialect, and mixing two would count tokens twice.
func (r *rawUsage) set(f field, value gjson.Result) {
	if value.Type != gjson.Number || value.Num < 0 || value.Num > maxCount {
		return
	}
	if fam := familyOf[f]; fam != r.family {
		*r = rawUsage{family: fam}
	}
	r.values[f] = value.Int()
}

// usage normalises the raw fields; false when no field has been seen.
func (r *rawUsage) usage() (Usage, bool) {
	v := &r.values
	switch r.family {
	case chatFamily:
		return Usage{
			Input:     v[promptTokens],
			Output:    v[completionTokens],
			CacheRead: v[promptCachedTokens],
		}, true
	case inputOutputFamily:
		return Usage{
			Input:         v[inputTokens] + v[cacheCreationInputTokens] + v[cacheReadInputTokens],
			Output:        v[outputTokens],
			CacheRead:     v[cacheReadInputTokens] + v[inputCachedTokens],
			CacheCreation: v[cacheCreationInputTokens],
		}, true
	case geminiFamily:
		return Usage{
			Input:     v[promptTokenCount] + v[toolUsePromptTokenCount],
			Output:    v[candidatesTokenCount] + v[thoughtsTokenCount],
			CacheRead: v[cachedContentTokenCount],
		}, true
	}
	return Usage{}, false
}

// stringView returns b as a string without copying it, which keeps parsing a
// usage object allocation-free. It is safe because b is not modified while
// gjson reads it and nothing derived from the string outlives apply: only
// integers are kept.
func stringView(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
