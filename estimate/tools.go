package estimate

import "strings"

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
//
// The walk counts the members of the objects it renders so (toolMembers):
// a model of another family reads the tools' JSON, which is that
// rendering and, for each member, its key and its punctuation
// (jsonMemberUnits, family.go).
const (
	openAIFunctionStart  = 7  // each function
	openAIPropertiesInit = 3  // a function's parameters, when it has some
	openAIPropertyKey    = 3  // each parameter
	openAIEnumInit       = -3 // a parameter's enum, before its values
	openAIEnumItem       = 3  // each value of an enum
	openAIFunctionsEnd   = 12 // the tools, when there is a function
)

// openAITools counts the "tools" (or legacy "functions") array at w.i, which
// it reads, as OpenAI renders it: chat's {"type": "function", "function":
// {...}}, Responses' flat {"type": "function", "name": ...}, and legacy
// functions alike. It reads the JSON with the walker (gjson would allocate
// for every string with an escape); a member that occurs twice counts
// twice, as everywhere in the estimate.
func (w *walker) openAITools() {
	if w.peek() != '[' {
		w.weighValue()
		return
	}
	if !w.enter() {
		return
	}
	functions := 0
	for first := true; w.elem(first); first = false {
		v := w.i
		switch {
		case w.peek() != '{':
			w.weighValue() // not a tool: its JSON
		case w.openAITool():
			functions++
		}
		w.done(v)
	}
	if functions > 0 {
		w.units += openAIFunctionsEnd * UnitsPerToken
	}
}

// openAITool reads a tool object at w.i and counts it: if it is a function
// (its "function" object, or itself, names one) as OpenAI renders it, else
// by its JSON. It returns whether it is a function.
func (w *walker) openAITool() bool {
	v, before := w.i, w.units
	var flat, wrapped int64 // the units of its members, and of its "function" objects
	named, wrappedNamed := false, false
	w.enter()
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			break
		}
		w.toolMembers++
		m := w.i
		if k == "function" && w.peek() == '{' {
			start := w.units
			wrappedNamed = w.openAIFunction() || wrappedNamed
			wrapped += w.units - start
		} else {
			start := w.units
			named = w.openAIMember(k) || named
			flat += w.units - start
		}
		w.units = before
		w.done(m)
	}
	switch {
	case w.bad:
	case wrappedNamed:
		w.units = before + openAIFunctionStart*UnitsPerToken + wrapped
	case named:
		w.units = before + openAIFunctionStart*UnitsPerToken + flat
	default:
		w.weighText(v, w.i, true)
		return false
	}
	return true
}

// openAIFunction reads a function object at w.i and counts its members as
// OpenAI renders them. It returns whether it names the function (a string
// "name").
func (w *walker) openAIFunction() bool {
	named := false
	w.enter()
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return named
		}
		w.toolMembers++
		v := w.i
		named = w.openAIMember(k) || named
		w.done(v)
	}
}

// openAIMember counts a member of a function at w.i, which it reads:
// name:description, its parameters, nothing for its type and strict,
// anything else by its JSON. It returns whether it is a string "name".
func (w *walker) openAIMember(k string) bool {
	switch k {
	case "type", "strict": // not rendered
		w.skip()
	case "name", "description": // name:description
		name := k == "name" && w.peek() == '"'
		w.weighValue()
		w.units += weightOther
		return name
	case "parameters":
		w.openAIParameters()
	default:
		w.weighValue()
	}
	return false
}

// openAIParameters counts a function's parameters schema at w.i as OpenAI
// renders it: each property as name:type:description, an enum as its
// values; the object's type, required and additionalProperties as the shape
// of what follows; anything else by its JSON.
func (w *walker) openAIParameters() {
	if w.peek() != '{' {
		w.weighValue()
		return
	}
	w.enter()
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		w.toolMembers++
		v := w.i
		switch {
		case k == "type" || k == "required" || k == "additionalProperties":
			w.skip()
		case k == "properties" && w.peek() == '{':
			w.enter()
			for first := true; ; first = false {
				w.whole = true // its text counts
				name, ok := w.key(first)
				w.whole = false
				if !ok {
					break
				}
				w.toolMembers++
				if first {
					w.units += openAIPropertiesInit * UnitsPerToken
				}
				// name: (decoded, as the walker reads every key)
				w.units += openAIPropertyKey*UnitsPerToken + weightOther
				w.weighString(name, strings.IndexByte(name, '\\') >= 0)
				p := w.i
				w.openAIProperty()
				w.done(p)
			}
		default:
			w.weighValue()
		}
		w.done(v)
	}
}

// openAIProperty counts a parameter's schema at w.i: type:description, the
// values of an enum, anything else by its JSON.
func (w *walker) openAIProperty() {
	if w.peek() != '{' {
		w.weighValue()
		return
	}
	w.enter()
	for first := true; ; first = false {
		k, ok := w.key(first)
		if !ok {
			return
		}
		w.toolMembers++
		v := w.i
		switch {
		case k == "type" || k == "description":
			w.weighValue()
			w.units += weightOther // ':'
		case k == "enum" && w.peek() == '[':
			w.units += openAIEnumInit * UnitsPerToken
			w.enter()
			for first := true; w.elem(first); first = false {
				w.units += openAIEnumItem * UnitsPerToken
				w.weighValue()
			}
		default:
			w.weighValue()
		}
		w.done(v)
	}
}

// weighValue reads the value at w.i and adds its calibrated count: a
// string's text, anything else's JSON.
func (w *walker) weighValue() {
	v := w.i
	if w.peek() == '"' {
		raw, n := w.str()
		if !w.bad {
			w.weighText(v+1, v+1+len(raw), n != int64(len(raw)))
		}
		return
	}
	w.skip()
	if !w.bad {
		w.weighText(v, w.i, true)
	}
}
