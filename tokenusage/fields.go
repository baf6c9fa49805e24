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
	// OpenAI chat/completions and the many APIs compatible with it:
	// prompt_tokens, completion_tokens.
	chatFamily
	// Anthropic Messages, the OpenAI Responses API and Cohere v2:
	// input_tokens, output_tokens. They differ only in fields that never
	// occur together, so one normalisation serves all three.
	inputOutputFamily
	// Gemini usageMetadata: promptTokenCount, candidatesTokenCount, ...
	geminiFamily
	// Amazon Bedrock Converse: inputTokens, outputTokens, ...
	bedrockFamily
	// Ollama's native API: prompt_eval_count, eval_count.
	ollamaFamily
)

// field is a raw usage field as the provider names it.
type field uint8

const (
	promptTokens           field = iota // chat
	completionTokens                    // chat
	totalTokens                         // total_tokens, of any family that reports it (chat, Responses)
	promptCachedTokens                  // chat: prompt_tokens_details.cached_tokens
	promptCacheWriteTokens              // chat: prompt_tokens_details.cache_write_tokens (OpenRouter)
	reasoningTokens                     // chat: completion_tokens_details.reasoning_tokens

	inputTokens              // Anthropic, Responses, Cohere (billed_units)
	outputTokens             // Anthropic, Responses, Cohere (billed_units)
	cacheCreationInputTokens // Anthropic, excluded from input_tokens
	cacheReadInputTokens     // Anthropic, excluded from input_tokens
	inputCachedTokens        // Responses: input_tokens_details.cached_tokens, included in input_tokens
	outputReasoningTokens    // Responses: output_tokens_details.reasoning_tokens, included in output_tokens
	iterations               // Anthropic: 1 when usage.iterations was reported
	iterationsInput          // Anthropic: the sums over usage.iterations
	iterationsOutput
	iterationsCacheRead
	iterationsCacheCreation

	promptTokenCount        // Gemini, cached tokens included
	toolUsePromptTokenCount // Gemini
	candidatesTokenCount    // Gemini
	thoughtsTokenCount      // Gemini
	cachedContentTokenCount // Gemini

	bedrockInputTokens      // Bedrock: inputTokens
	bedrockOutputTokens     // Bedrock: outputTokens
	bedrockTotalTokens      // Bedrock: totalTokens
	bedrockCacheReadTokens  // Bedrock: cacheReadInputTokens
	bedrockCacheWriteTokens // Bedrock: cacheWriteInputTokens

	ollamaPromptEvalCount // Ollama: prompt_eval_count
	ollamaEvalCount       // Ollama: eval_count

	numFields
	noField = numFields
)

var familyOf = [numFields]family{
	promptTokens:             chatFamily,
	completionTokens:         chatFamily,
	totalTokens:              noFamily, // beside the fields that tell the family
	promptCachedTokens:       chatFamily,
	promptCacheWriteTokens:   chatFamily,
	reasoningTokens:          chatFamily,
	inputTokens:              inputOutputFamily,
	outputTokens:             inputOutputFamily,
	cacheCreationInputTokens: inputOutputFamily,
	cacheReadInputTokens:     inputOutputFamily,
	inputCachedTokens:        inputOutputFamily,
	outputReasoningTokens:    inputOutputFamily,
	iterations:               inputOutputFamily,
	iterationsInput:          inputOutputFamily,
	iterationsOutput:         inputOutputFamily,
	iterationsCacheRead:      inputOutputFamily,
	iterationsCacheCreation:  inputOutputFamily,
	promptTokenCount:         geminiFamily,
	toolUsePromptTokenCount:  geminiFamily,
	candidatesTokenCount:     geminiFamily,
	thoughtsTokenCount:       geminiFamily,
	cachedContentTokenCount:  geminiFamily,
	bedrockInputTokens:       bedrockFamily,
	bedrockOutputTokens:      bedrockFamily,
	bedrockTotalTokens:       bedrockFamily,
	bedrockCacheReadTokens:   bedrockFamily,
	bedrockCacheWriteTokens:  bedrockFamily,
	ollamaPromptEvalCount:    ollamaFamily,
	ollamaEvalCount:          ollamaFamily,
}

// rawUsage holds the latest value of every raw field seen, and which fields
// were seen.
type rawUsage struct {
	family family
	seen   uint64 // bit f set when values[f] was reported
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
		case "total_tokens":
			r.set(totalTokens, value)
		case "prompt_tokens_details":
			r.set(promptCachedTokens, value.Get("cached_tokens"))
			r.set(promptCacheWriteTokens, value.Get("cache_write_tokens"))
		case "completion_tokens_details":
			r.set(reasoningTokens, value.Get("reasoning_tokens"))
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
		case "output_tokens_details":
			r.set(outputReasoningTokens, value.Get("reasoning_tokens"))
		case "iterations":
			r.applyIterations(value)
		case "billed_units": // Cohere: what is billed, beside "tokens" (what the model saw)
			r.set(inputTokens, value.Get("input_tokens"))
			r.set(outputTokens, value.Get("output_tokens"))
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
		case "inputTokens":
			r.set(bedrockInputTokens, value)
		case "outputTokens":
			r.set(bedrockOutputTokens, value)
		case "totalTokens":
			r.set(bedrockTotalTokens, value)
		case "cacheReadInputTokens":
			r.set(bedrockCacheReadTokens, value)
		case "cacheWriteInputTokens":
			r.set(bedrockCacheWriteTokens, value)
		}
		return true
	})
}

// applyIterations records Anthropic's usage.iterations: one entry per
// sampling (a compaction, each server-tool round), every one billed, while
// the top-level numbers cover only the last. The sums replace the top-level
// numbers when normalised.
func (r *rawUsage) applyIterations(list gjson.Result) {
	if !list.IsArray() {
		return
	}
	var in, out, read, created int64
	valid := true
	list.ForEach(func(_, it gjson.Result) bool {
		i, ok1 := count(it.Get("input_tokens"))
		o, ok2 := count(it.Get("output_tokens"))
		cr, ok3 := countOrZero(it.Get("cache_read_input_tokens"))
		cc, ok4 := countOrZero(it.Get("cache_creation_input_tokens"))
		if !ok1 || !ok2 || !ok3 || !ok4 {
			valid = false
			return false
		}
		in, out = min(in+i, maxCount), min(out+o, maxCount)
		read, created = min(read+cr, maxCount), min(created+cc, maxCount)
		return true
	})
	if !valid {
		return
	}
	r.setInt(iterations, 1)
	r.setInt(iterationsInput, in)
	r.setInt(iterationsOutput, out)
	r.setInt(iterationsCacheRead, read)
	r.setInt(iterationsCacheCreation, created)
}

// maxCount bounds the numbers accepted as token counts: far beyond any real
// count, exactly representable as a float64, and small enough that summing a
// few of them cannot overflow.
const maxCount = 1 << 53

// count returns a token count: a number in [0, maxCount].
func count(value gjson.Result) (int64, bool) {
	if value.Type != gjson.Number || value.Num < 0 || value.Num > maxCount {
		return 0, false
	}
	return value.Int(), true
}

// countOrZero is count, with an absent field meaning zero.
func countOrZero(value gjson.Result) (int64, bool) {
	if !value.Exists() {
		return 0, true
	}
	return count(value)
}

// set records a field when value is a count; null, absent or malformed
// values leave the earlier value in place.
func (r *rawUsage) set(f field, value gjson.Result) {
	if n, ok := count(value); ok {
		r.setInt(f, n)
	}
}

// setInt records a field. A field of another family than the one seen so
// far starts over: one response speaks one dialect, and mixing two would
// count tokens twice.
func (r *rawUsage) setInt(f field, n int64) {
	if fam := familyOf[f]; fam != noFamily && fam != r.family {
		for g := range numFields {
			if familyOf[g] != noFamily {
				r.values[g] = 0
				r.seen &^= 1 << g
			}
		}
		r.family = fam
	}
	r.values[f] = n
	r.seen |= 1 << f
}

// merge records the fields of a completed root, as setInt would one by one.
func (r *rawUsage) merge(from *rawUsage) {
	for f := range numFields {
		if from.seen&(1<<f) != 0 {
			r.setInt(f, from.values[f])
		}
	}
}

// usage normalises the raw fields; false when no field has been seen.
func (r *rawUsage) usage() (Usage, bool) {
	v := &r.values
	switch r.family {
	case chatFamily:
		u := Usage{
			Input:         v[promptTokens],
			Output:        v[completionTokens],
			CacheRead:     v[promptCachedTokens],
			CacheCreation: v[promptCacheWriteTokens],
		}
		// OpenAI counts reasoning inside completion_tokens; xAI reports it
		// beside them, and says so in its total.
		if v[reasoningTokens] > 0 && v[totalTokens] == v[promptTokens]+v[completionTokens]+v[reasoningTokens] {
			u.Output += v[reasoningTokens]
		}
		u.Reasoning = min(v[reasoningTokens], u.Output)
		return u, true
	case inputOutputFamily:
		if v[iterations] != 0 {
			return Usage{
				Input:         v[iterationsInput] + v[iterationsCacheRead] + v[iterationsCacheCreation],
				Output:        v[iterationsOutput],
				CacheRead:     v[iterationsCacheRead],
				CacheCreation: v[iterationsCacheCreation],
			}, true
		}
		return Usage{
			Input:         v[inputTokens] + v[cacheCreationInputTokens] + v[cacheReadInputTokens],
			Output:        v[outputTokens],
			CacheRead:     v[cacheReadInputTokens] + v[inputCachedTokens],
			CacheCreation: v[cacheCreationInputTokens],
			Reasoning:     min(v[outputReasoningTokens], v[outputTokens]),
		}, true
	case geminiFamily:
		return Usage{
			Input:     v[promptTokenCount] + v[toolUsePromptTokenCount],
			Output:    v[candidatesTokenCount] + v[thoughtsTokenCount],
			CacheRead: v[cachedContentTokenCount],
			Reasoning: v[thoughtsTokenCount],
		}, true
	case bedrockFamily:
		u := Usage{
			Input:         v[bedrockInputTokens],
			Output:        v[bedrockOutputTokens],
			CacheRead:     v[bedrockCacheReadTokens],
			CacheCreation: v[bedrockCacheWriteTokens],
		}
		// Bedrock reports cache reads and writes beside inputTokens, and its
		// total says so; a total without them means they are included.
		if r.seen&(1<<bedrockTotalTokens) == 0 || v[bedrockTotalTokens] != u.Input+u.Output {
			u.Input += u.CacheRead + u.CacheCreation
		}
		return u, true
	case ollamaFamily:
		return Usage{Input: v[ollamaPromptEvalCount], Output: v[ollamaEvalCount]}, true
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
