//go:build !wasm || !gc || noasm

package estimate

import (
	"unicode/utf16"
	"unicode/utf8"
)

// plainTurns reads, from s[i:], the run of elements of a turns array that
// have the plain form (plain.go), each with the ',' before it unless first
// tells that no element of the array has been read yet. It returns the index
// right after the last element read, the number n of elements read, and the
// prompt text they hold; n = 0 and end = i when the element at i (after
// whitespace and a comma) is not plain, or when the array ends there. With
// spans, that text is weighed with the calibrated count (count.go): units
// is the weight of its strings, each weighed as spansUnits weighs it as a
// span, and the JSON of its tool calls is noted in spans from spans.n on
// (with escapes), for the caller to weigh with spansUnits; an element whose
// tool calls do not fit in spans is not plain.
func plainTurns(s string, i int, first bool, simple *[256]bool, spans *textSpans) (end, n int, text, units int64) {
	end = i
	for {
		j := skipSpace(s, end)
		if !first {
			if j >= len(s) || s[j] != ',' {
				return
			}
			j = skipSpace(s, j+1)
		}
		j, t, u, ok := plainObject(s, j, simple, spans)
		if !ok {
			return
		}
		end, n, text, units, first = j, n+1, text+t, units+u, false
	}
}

// plainObject reads the plain message at s[i], returning the index after it,
// its text and with spans its units, its tool calls noted in spans, or ok =
// false if it is not plain (spans.n unchanged).
func plainObject(s string, i int, simple *[256]bool, spans *textSpans) (end int, text, units int64, ok bool) {
	if i >= len(s) || s[i] != '{' {
		return 0, 0, 0, false
	}
	noted := int64(0) // the spans of its tool calls, from spans.n on
	i = skipSpace(s, i+1)
	inParts := false // in the message's parts, not at its own members
	for state := atObjectStart; ; {
		switch state {
		case atMember, atObjectStart:
			if state == atObjectStart && i < len(s) && s[i] == '}' {
				state = afterValue // which closes the object
				continue
			}
			// A key without escapes, a colon.
			if i >= len(s) || s[i] != '"' {
				return 0, 0, 0, false
			}
			k, j, saved := plainString(s, i+1, simple)
			if j < 0 || saved != 0 {
				return 0, 0, 0, false
			}
			// Whether the value counts: as text, or as a tool call or
			// result in the history (a string as text, anything else by
			// its JSON, as the walker's toolCall counts it).
			counted, toolCall := false, false
			if !inParts {
				switch k {
				case "summary", "encrypted_content": // a reasoning item: the walker's
					return 0, 0, 0, false
				}
				counted = k == "content" || k == "parts"
				toolCall = k == "tool_calls" || k == "function_call" || k == "arguments" || k == "output"
			} else {
				switch k {
				case "content", // counts only in a tool_result: the walker's
					"thinking", "signature", "data", "thoughtSignature", "thought_signature", // reasoning: the walker's
					"image_url", "file_id", "source", "fileData", "file_data", // an image by reference: the walker's
					"file", "input_audio", "inlineData", "inline_data", "image", "audio", "video", "document": // inline data: the walker's
					return 0, 0, 0, false
				}
				counted = k == "text"
				toolCall = k == "input" || k == "functionCall" || k == "functionResponse" // Anthropic's tool_use, Gemini's calls
			}
			if i = skipSpace(s, j); i >= len(s) || s[i] != ':' {
				return 0, 0, 0, false
			}
			i = skipSpace(s, i+1)
			// The value: text that counts, the message's parts, a tool
			// call, or anything else, skipped.
			nest := MaxDepth - plainMessageDepth // as the walker skips a message's member
			if inParts {
				nest -= 2 // a part's
			}
			switch {
			case (counted || toolCall) && i < len(s) && s[i] == '"':
				v, j, saved := plainString(s, i+1, simple)
				if j < 0 {
					return 0, 0, 0, false
				}
				text += int64(len(v) - saved)
				if spans != nil {
					units += spanUnits(s[:j-1], i+1, saved > 0)
				}
				i = j
			case counted && !inParts && i < len(s) && s[i] == '[':
				if i = skipSpace(s, i+1); i < len(s) && s[i] == ']' {
					i++
					break
				}
				inParts, state = true, atPart
				continue
			case toolCall:
				v := i
				if i, ok = skipValue(s, i, nest, simple); !ok {
					return 0, 0, 0, false
				}
				text += int64(i - v)
				if spans != nil {
					k := spans.n + noted
					if k == maxTextSpans {
						return 0, 0, 0, false
					}
					spans.at[k] = [2]int64{int64(v), int64(i)}
					spans.escaped |= 1 << k
					noted++
				}
			default:
				if i, ok = skipValue(s, i, nest, simple); !ok {
					return 0, 0, 0, false
				}
			}
			state = afterValue
		case afterValue:
			switch i = skipSpace(s, i); {
			case i < len(s) && s[i] == ',':
				i, state = skipSpace(s, i+1), atMember
			case i < len(s) && s[i] == '}':
				i++
				if !inParts {
					if spans != nil {
						spans.n += noted
					}
					return i, text, units, true
				}
				state = afterPart
			default:
				return 0, 0, 0, false
			}
		case atPart:
			if i < len(s) && s[i] == '{' {
				i, state = skipSpace(s, i+1), atObjectStart
				continue
			}
			if i, ok = skipValue(s, i, MaxDepth-plainMessageDepth-1, simple); !ok { // the walker skips what is not an object
				return 0, 0, 0, false
			}
			state = afterPart
		case afterPart:
			switch i = skipSpace(s, i); {
			case i < len(s) && s[i] == ',':
				i, state = skipSpace(s, i+1), atPart
			case i < len(s) && s[i] == ']':
				i++
				inParts, state = false, afterValue
			default:
				return 0, 0, 0, false
			}
		}
	}
}

// plainString reads the content of a string at s[i:] (after its opening
// quote) that has no control character and no escape but the two-byte ones
// and the \u escapes of characters that are not surrogates. It returns the
// raw content, the index after the closing quote and how many bytes the
// escapes save, or j = -1 if the string is not such a string.
func plainString(s string, i int, simple *[256]bool) (raw string, j, saved int) {
	for k := i; ; {
		end, escapes := scanString(s, k, simple)
		saved += escapes
		if end+6 <= len(s) && s[end] == '\\' && s[end+1] == 'u' {
			if r, ok := hex4(s, end+2); ok && !utf16.IsSurrogate(r) {
				saved += 6 - utf8.RuneLen(r)
				k = end + 6
				continue
			}
		}
		if end >= len(s) || s[end] != '"' {
			return "", -1, 0
		}
		return s[i:end], end + 1, saved
	}
}
