package tokenusage

import (
	"math/bits"
	"strings"
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
	promptAudioTokens                   // chat: prompt_tokens_details.audio_tokens
	promptImageTokens                   // chat: prompt_tokens_details.image_tokens
	completionAudioTokens               // chat: completion_tokens_details.audio_tokens
	completionImageTokens               // chat: completion_tokens_details.image_tokens (OpenRouter)

	inputTokens              // Anthropic, Responses, Cohere (billed_units)
	outputTokens             // Anthropic, Responses, Cohere (billed_units)
	cacheCreationInputTokens // Anthropic, excluded from input_tokens
	cacheReadInputTokens     // Anthropic, excluded from input_tokens
	inputCachedTokens        // Responses: input_tokens_details.cached_tokens, included in input_tokens
	outputReasoningTokens    // Responses: output_tokens_details.reasoning_tokens, included in output_tokens
	inputImageTokens         // Images API: input_tokens_details.image_tokens, included in input_tokens
	outputImageTokens        // Images API: output_tokens_details.image_tokens, included in output_tokens
	inputAudioTokens         // audio transcriptions: input_token_details.audio_tokens, included in input_tokens
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
	// Gemini's lists by modality (see applyModalities): the AUDIO and the
	// IMAGE tokens of promptTokensDetails, toolUsePromptTokensDetails,
	// cacheTokensDetails and candidatesTokensDetails.
	promptAudioCount
	promptImageCount
	toolUseAudioCount
	toolUseImageCount
	cacheAudioCount
	cacheImageCount
	candidatesAudioCount
	candidatesImageCount

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
	promptAudioTokens:        chatFamily,
	promptImageTokens:        chatFamily,
	completionAudioTokens:    chatFamily,
	completionImageTokens:    chatFamily,
	inputTokens:              inputOutputFamily,
	outputTokens:             inputOutputFamily,
	cacheCreationInputTokens: inputOutputFamily,
	cacheReadInputTokens:     inputOutputFamily,
	inputCachedTokens:        inputOutputFamily,
	outputReasoningTokens:    inputOutputFamily,
	inputImageTokens:         inputOutputFamily,
	outputImageTokens:        inputOutputFamily,
	inputAudioTokens:         inputOutputFamily,
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
	promptAudioCount:         geminiFamily,
	promptImageCount:         geminiFamily,
	toolUseAudioCount:        geminiFamily,
	toolUseImageCount:        geminiFamily,
	cacheAudioCount:          geminiFamily,
	cacheImageCount:          geminiFamily,
	candidatesAudioCount:     geminiFamily,
	candidatesImageCount:     geminiFamily,
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
			r.applyDetails(value, promptDetail)
		case "completion_tokens_details":
			r.applyDetails(value, completionDetail)
		case "input_tokens":
			r.set(inputTokens, value)
		case "output_tokens":
			r.set(outputTokens, value)
		case "cache_creation_input_tokens":
			r.set(cacheCreationInputTokens, value)
		case "cache_read_input_tokens":
			r.set(cacheReadInputTokens, value)
		case "input_tokens_details":
			r.applyDetails(value, inputDetail)
		case "output_tokens_details":
			r.applyDetails(value, outputDetail)
		case "input_token_details": // audio transcriptions' spelling
			r.set(inputAudioTokens, value.Get("audio_tokens"))
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
		case "promptTokensDetails":
			r.applyModalities(value, promptAudioCount, promptImageCount)
		case "toolUsePromptTokensDetails":
			r.applyModalities(value, toolUseAudioCount, toolUseImageCount)
		case "cacheTokensDetails":
			r.applyModalities(value, cacheAudioCount, cacheImageCount)
		case "candidatesTokensDetails":
			r.applyModalities(value, candidatesAudioCount, candidatesImageCount)
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

// applyDetails records the counts of a breakdown (prompt_tokens_details
// and the like), the field of each key given by of, in one pass over it
// (where a Get per key would cross it once for each).
func (r *rawUsage) applyDetails(details gjson.Result, of func(key string) field) {
	if !details.IsObject() {
		return
	}
	details.ForEach(func(key, value gjson.Result) bool {
		if f := of(key.Str); f != noField {
			r.set(f, value)
		}
		return true
	})
}

// promptDetail, completionDetail, inputDetail and outputDetail are the
// fields of each breakdown, by key.
func promptDetail(key string) field {
	switch key {
	case "cached_tokens":
		return promptCachedTokens
	case "cache_write_tokens":
		return promptCacheWriteTokens
	case "audio_tokens":
		return promptAudioTokens
	case "image_tokens":
		return promptImageTokens
	}
	return noField
}

func completionDetail(key string) field {
	switch key {
	case "reasoning_tokens":
		return reasoningTokens
	case "audio_tokens":
		return completionAudioTokens
	case "image_tokens":
		return completionImageTokens
	}
	return noField
}

func inputDetail(key string) field {
	switch key {
	case "cached_tokens":
		return inputCachedTokens
	case "image_tokens":
		return inputImageTokens
	}
	return noField
}

func outputDetail(key string) field {
	switch key {
	case "reasoning_tokens":
		return outputReasoningTokens
	case "image_tokens":
		return outputImageTokens
	}
	return noField
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

// applyModalities records one of Gemini's lists by modality (Gemini API
// and Vertex AI: UsageMetadata's promptTokensDetails,
// toolUsePromptTokensDetails, cacheTokensDetails, candidatesTokensDetails,
// each a list of ModalityTokenCount {modality, tokenCount}, the modality
// one of TEXT, IMAGE, VIDEO, AUDIO, DOCUMENT): its AUDIO and IMAGE tokens,
// each summed over the list. TEXT, VIDEO and DOCUMENT are left to the
// whole, priced as text: Google prices video input as text and images, and
// a document's pages as images or text (tokens of a kind package pricing
// has no price of). A list replaces the earlier one as a whole, a modality
// it leaves out meaning none (proto3 JSON leaves out a zero tokenCount
// too); a malformed list is ignored.
//
// The modality is compared as written (an escaped spelling is none of
// them, so text): Raw is a view of the object, where Str may be a copy.
// Gemini sends its usage with every streamed event, mostly with lists of
// TEXT alone: a list without an 'A' names neither AUDIO nor IMAGE, so has
// none of them, and is not read further: a byte search, rather than
// reading every entry of every event's lists.
func (r *rawUsage) applyModalities(list gjson.Result, audio, image field) {
	if !list.IsArray() {
		return
	}
	if strings.IndexByte(list.Raw, 'A') < 0 { // in AUDIO and IMAGE, not in TEXT, VIDEO, DOCUMENT or the keys
		r.setInt(audio, 0)
		r.setInt(image, 0)
		return
	}
	var a, im int64
	valid := true
	list.ForEach(func(_, it gjson.Result) bool {
		n, ok := countOrZero(it.Get("tokenCount"))
		if !ok || !it.IsObject() {
			valid = false
			return false
		}
		switch it.Get("modality").Raw {
		case `"AUDIO"`:
			a = min(a+n, maxCount)
		case `"IMAGE"`:
			im = min(im+n, maxCount)
		}
		return true
	})
	if valid {
		r.setInt(audio, a)
		r.setInt(image, im)
	}
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
		// Only the fields seen hold values.
		for s := r.seen & familyFields; s != 0; s &= s - 1 {
			r.values[bits.TrailingZeros64(s)] = 0
		}
		r.seen &^= familyFields
		r.family = fam
	}
	r.values[f] = n
	r.seen |= 1 << f
}

// familyFields has the bit of every field of a family set (the bits of
// rawUsage.seen a family's change clears).
var familyFields = func() (mask uint64) {
	for f := range numFields {
		if familyOf[f] != noFamily {
			mask |= 1 << f
		}
	}
	return mask
}()

// seen is a bit per field: there are at most 64.
var _ = [64 - numFields]struct{}{}

// merge records the fields of a completed root, as setInt would one by one
// (in the order of the fields).
func (r *rawUsage) merge(from *rawUsage) {
	for s := from.seen; s != 0; s &= s - 1 {
		f := field(bits.TrailingZeros64(s))
		r.setInt(f, from.values[f])
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
		// Audio and images, parts of prompt_tokens and completion_tokens
		// (OpenAI's chat completions reference: "Audio input tokens
		// present in the prompt", "Image input tokens present in the
		// prompt", audio "generated by the model"; OpenRouter's
		// completion_tokens_details.image_tokens, "generated by the model
		// for image output"; xAI's add up to prompt_tokens with its
		// text_tokens).
		u.InputAudio, u.InputImage = min(v[promptAudioTokens], u.Input), min(v[promptImageTokens], u.Input)
		u.OutputAudio, u.OutputImage = min(v[completionAudioTokens], u.Output), min(v[completionImageTokens], u.Output)
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
		u := Usage{
			Input:         v[inputTokens] + v[cacheCreationInputTokens] + v[cacheReadInputTokens],
			Output:        v[outputTokens],
			CacheRead:     v[cacheReadInputTokens] + v[inputCachedTokens],
			CacheCreation: v[cacheCreationInputTokens],
			Reasoning:     min(v[outputReasoningTokens], v[outputTokens]),
		}
		// OpenAI's Images API (GPT image models; the API reference's
		// ImagesResponse.usage, and the image_generation.completed and
		// image_edit.completed events' usage) breaks input_tokens into
		// input_tokens_details' text_tokens and image_tokens, and its
		// output_tokens are "the number of image tokens in the output
		// image", unless output_tokens_details says how many of them are
		// images. The Responses API's usage has neither (its
		// input_tokens_details has cached_tokens alone), so an
		// image_tokens in input_tokens_details tells the Images API.
		// Audio transcriptions (gpt-4o-transcribe: the transcription's
		// usage of type "tokens") break their input_tokens into
		// input_token_details' text_tokens and audio_tokens.
		u.InputImage = min(v[inputImageTokens], u.Input)
		u.InputAudio = min(v[inputAudioTokens], u.Input)
		switch {
		case r.seen&(1<<outputImageTokens) != 0:
			u.OutputImage = min(v[outputImageTokens], u.Output)
		case r.seen&(1<<inputImageTokens) != 0:
			u.OutputImage = u.Output
		}
		return u, true
	case geminiFamily:
		// The lists by modality break down promptTokenCount (which
		// "includes the number of tokens in the cached content", the
		// Gemini API reference's UsageMetadata says),
		// toolUsePromptTokenCount, cachedContentTokenCount and
		// candidatesTokenCount: audio and images read from the cache are
		// cache reads, priced as those, so they are left out of the
		// input's audio and images.
		input := v[promptTokenCount] + v[toolUsePromptTokenCount]
		output := v[candidatesTokenCount] + v[thoughtsTokenCount]
		media := func(prompt, toolUse, cached field) int64 {
			return min(max(v[prompt]+v[toolUse]-v[cached], 0), input)
		}
		return Usage{
			Input:       input,
			Output:      output,
			CacheRead:   v[cachedContentTokenCount],
			Reasoning:   v[thoughtsTokenCount],
			InputAudio:  media(promptAudioCount, toolUseAudioCount, cacheAudioCount),
			InputImage:  media(promptImageCount, toolUseImageCount, cacheImageCount),
			OutputAudio: min(v[candidatesAudioCount], output),
			OutputImage: min(v[candidatesImageCount], output),
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
