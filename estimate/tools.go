package estimate

import (
	"strings"

	"github.com/tidwall/gjson"
)

// OpenAI's rendering of function tools
//
// OpenAI does not show its models the JSON of a request's tools: it writes
// each function as its name and description, then each parameter as its
// name, type and description (an enum as its values), which is much shorter
// than the JSON (a third of it, or less). Its cookbook ("How to count tokens
// with tiktoken", num_tokens_for_tools, gpt-4o and later) counts them so,
// with the tokens of that rendering's framing below, and the estimate counts
// the same: the text of each name, description, type and enum value by the
// calibrated count, and a ':' between them. What the cookbook does not
// render (a parameter's nested properties or items, a format, bounds,
// $defs, a tool that is not a function such as Responses' web_search)
// counts by its JSON, an upper bound of whatever OpenAI writes for it.
const (
	openAIFunctionStart  = 7  // each function
	openAIPropertiesInit = 3  // a function's parameters, when it has some
	openAIPropertyKey    = 3  // each parameter
	openAIEnumInit       = -3 // a parameter's enum, before its values
	openAIEnumItem       = 3  // each value of an enum
	openAIFunctionsEnd   = 12 // the tools, when there is a function
)

// openAITools counts a "tools" (or legacy "functions") array as OpenAI
// renders it: chat's {"type": "function", "function": {...}}, Responses'
// flat {"type": "function", "name": ...}, and legacy functions alike. raw
// is valid JSON (the walker validated it).
func (w *walker) openAITools(raw string) {
	functions := 0
	gjson.Parse(raw).ForEach(func(_, tool gjson.Result) bool {
		fn := tool
		if f := tool.Get("function"); f.IsObject() {
			fn = f
		}
		if !fn.IsObject() || fn.Get("name").Type != gjson.String {
			w.weighJSON(tool.Raw) // a built-in tool, or anything else
			return true
		}
		functions++
		w.units += openAIFunctionStart * UnitsPerToken
		fn.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "type", "strict": // not rendered
			case "name", "description": // name:description
				w.weighValue(v)
				w.units += weightOther
			case "parameters":
				w.openAIParameters(v)
			default:
				w.weighJSON(v.Raw)
			}
			return true
		})
		return true
	})
	if functions > 0 {
		w.units += openAIFunctionsEnd * UnitsPerToken
	}
}

// openAIParameters counts a function's parameters schema as OpenAI renders
// it: each property as name:type:description, an enum as its values; the
// object's type, required and additionalProperties as the shape of what
// follows; anything else by its JSON.
func (w *walker) openAIParameters(p gjson.Result) {
	if !p.IsObject() {
		w.weighJSON(p.Raw)
		return
	}
	p.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type", "required", "additionalProperties":
		case "properties":
			if !v.IsObject() {
				w.weighJSON(v.Raw)
				break
			}
			first := true
			v.ForEach(func(name, property gjson.Result) bool {
				if first {
					w.units += openAIPropertiesInit * UnitsPerToken
					first = false
				}
				w.units += openAIPropertyKey*UnitsPerToken + weightOther // name:
				w.weighString(name.Raw[1:len(name.Raw)-1], strings.IndexByte(name.Raw, '\\') >= 0)
				w.openAIProperty(property)
				return true
			})
		default:
			w.weighJSON(v.Raw)
		}
		return true
	})
}

// openAIProperty counts a parameter's schema: type:description, the values
// of an enum, anything else by its JSON.
func (w *walker) openAIProperty(p gjson.Result) {
	if !p.IsObject() {
		w.weighJSON(p.Raw)
		return
	}
	p.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "type", "description":
			w.weighValue(v)
			w.units += weightOther // ':'
		case "enum":
			if !v.IsArray() {
				w.weighJSON(v.Raw)
				break
			}
			w.units += openAIEnumInit * UnitsPerToken
			v.ForEach(func(_, item gjson.Result) bool {
				w.units += openAIEnumItem * UnitsPerToken
				w.weighValue(item)
				return true
			})
		default:
			w.weighJSON(v.Raw)
		}
		return true
	})
}

// weighValue adds the calibrated count of a JSON value: a string's text,
// anything else's JSON.
func (w *walker) weighValue(v gjson.Result) {
	if v.Type == gjson.String && len(v.Raw) >= 2 {
		content := v.Raw[1 : len(v.Raw)-1]
		w.weighString(content, strings.IndexByte(content, '\\') >= 0)
		return
	}
	w.weighJSON(v.Raw)
}

// weighJSON adds the calibrated count of JSON text.
func (w *walker) weighJSON(raw string) { w.weighString(raw, true) }
