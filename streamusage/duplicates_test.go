package streamusage

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// Bodies whose stream, stream_options or include_usage keys are repeated or
// spelled in another case are rewritten to one exact "stream":true and one
// stream_options with one include_usage, true; want is the exact output,
// "" for a body left untouched.
func TestAskForUsageDuplicateKeys(t *testing.T) {
	const asked = `"stream":true,"stream_options":{"include_usage":true}`
	tests := []struct{ name, body, want string }{
		// stream repeated: true in any place streams somewhere.
		{"stream false then true", `{"model":"m","stream":false,"stream":true}`, `{` + asked + `,"model":"m"}`},
		{"stream true then false", `{"stream":true,"model":"m","stream":false}`, `{` + asked + `,"model":"m"}`},
		{"stream true twice", `{"stream":true,"stream":true,"n":1}`, `{` + asked + `,"n":1}`},
		{"stream null then true", `{"stream":null,"stream":true}`, `{` + asked + `}`},
		{"escaped stream twice", `{"\u0073tream":true,"\u0073tream":true}`, `{` + asked + `}`},
		{"escaped stream false then plain true", `{"stream":false,"str\u0065am":true}`, `{` + asked + `}`},
		{"stream false twice", `{"stream":false,"stream":false}`, ""},
		{"stream false and STREAM null", `{"stream":false,"STREAM":null}`, ""},

		// stream in another case: Go's encoding/json reads it as stream.
		{"STREAM", `{"model":"m","STREAM":true}`, `{` + asked + `,"model":"m"}`},
		{"Stream", `{"Stream":true,"model":"m"}`, `{` + asked + `,"model":"m"}`},
		{"long s", `{"ſtream":true}`, `{` + asked + `}`},
		{"long s escaped", `{"\u017ftream":true}`, `{` + asked + `}`},
		{"stream false, STREAM true", `{"stream":false,"STREAM":true}`, `{` + asked + `}`},
		{"stream true, STREAM false", `{"STREAM":false,"stream":true}`, `{` + asked + `}`},
		{"Stream_Options", `{"stream":true,"Stream_Options":{"include_usage":false,"x":1}}`, `{"stream":true,"stream_options":{"x":1,"include_usage":true}}`},
		{"Stream_Options asking", `{"stream":true,"Stream_Options":{"include_usage":true}}`, `{` + asked + `}`},

		// include_usage repeated or in another case.
		{"include_usage true then false", `{"stream":true,"stream_options":{"include_usage":true,"include_usage":false}}`, `{` + asked + `}`},
		{"include_usage false then true", `{"stream":true,"stream_options":{"include_usage":false,"include_usage":true}}`, `{` + asked + `}`},
		{"include_usage true twice", `{"stream":true,"stream_options":{"include_usage":true,"include_usage":true}}`, ""},
		{"Include_Usage false", `{"stream":true,"stream_options":{"Include_Usage":false}}`, `{` + asked + `}`},
		{"Include_Usage true alone", `{"stream":true,"stream_options":{"Include_Usage":true}}`, `{` + asked + `}`},
		{"include_usage true, INCLUDE_USAGE false", `{"stream":true,"stream_options":{"include_usage":true,"INCLUDE_USAGE":false}}`, `{` + asked + `}`},
		{"include_usage true, Include_Usage true", `{"stream":true,"stream_options":{"Include_Usage":true,"include_usage":true}}`, ""},
		{"include_obfuscation kept", `{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true,"include_usage":false}}`,
			`{"stream":true,"stream_options":{"include_obfuscation":false,"include_usage":true}}`},
		{"include_usage string twice", `{"stream":true,"stream_options":{"include_usage":"x","include_usage":"y"}}`, `{` + asked + `}`},

		// stream_options repeated: the last object is kept.
		{"stream_options false then true", `{"stream":true,"stream_options":{"include_usage":false},"stream_options":{"include_usage":true}}`, `{` + asked + `}`},
		{"stream_options true then false", `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":false}}`, `{` + asked + `}`},
		{"stream_options true then null", `{"stream":true,"stream_options":{"include_usage":true},"stream_options":null}`, `{` + asked + `}`},
		{"stream_options true then empty", `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{}}`, `{` + asked + `}`},
		{"stream_options true twice", `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`, ""},
		{"last object kept", `{"stream_options":{"a":1},"stream":true,"stream_options":{"include_obfuscation":true},"stream_options":"x","m":2}`,
			`{"stream":true,"stream_options":{"include_obfuscation":true,"include_usage":true},"m":2}`},
		{"no object", `{"stream":true,"stream":true,"stream_options":[],"stream_options":7}`, `{` + asked + `}`},

		// Every other byte of the other members is kept, in order, and the
		// whitespace around the object.
		{"formatted", " \n{\n  \"model\": \"m\",\n  \"stream\": false,\n  \"stream\" : true,\n  \"stream_options\": {\"x\" : [1, 2], \"include_usage\": false},\n  \"n\": 1\n}\n",
			" \n{\"stream\":true,\"stream_options\":{\"x\" : [1, 2],\"include_usage\":true},\"model\": \"m\",\"n\": 1\n}\n"},
		{"other duplicates kept", `{"model":"a","stream":true,"model":"b","stream":true}`, `{` + asked + `,"model":"a","model":"b"}`},
		{"nested stream keys kept", `{"stream":true,"STREAM":true,"metadata":{"stream":false,"stream_options":null}}`, `{` + asked + `,"metadata":{"stream":false,"stream_options":null}}`},

		// Not valid JSON: untouched.
		{"invalid", `{"stream":false,"stream":true,}`, ""},
		{"two objects", `{"stream":true}{"stream":true}`, ""},
		{"invalid STREAM", `{"STREAM":true`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.body)
			before := bytes.Clone(body)
			got, ok := AskForUsage(chatPath, body)
			if !bytes.Equal(body, before) {
				t.Fatalf("body modified: %q", body)
			}
			if tt.want == "" {
				if ok || got != nil {
					t.Fatalf("AskForUsage(%s) = %s, %v; want it untouched", tt.body, got, ok)
				}
				return
			}
			if !ok || string(got) != tt.want {
				t.Fatalf("AskForUsage(%s)\n got %s, %v\nwant %s", tt.body, got, ok, tt.want)
			}
			if !wantRewrite(t, body) {
				t.Fatal("wantRewrite disagrees")
			}
			checkRewrite(t, body, got)
		})
	}
}

// Property: for bodies built from random stream, stream_options and
// include_usage members, repeated and spelled in other cases, the rewrite
// happens exactly when the rules say (wantRewrite), and its output asks
// for the usage at every parser, keeping every other member.
func TestAskForUsageRandomDuplicates(t *testing.T) {
	r := newRand(2)
	streamKeys := []string{`"stream"`, `"stream"`, `"STREAM"`, `"Stream"`, `"ſtream"`, `"\u0073tream"`, `"streams"`}
	optionsKeys := []string{`"stream_options"`, `"stream_options"`, `"Stream_Options"`, `"STREAM_OPTIONS"`, `"stream\u005foptions"`}
	usageKeys := []string{`"include_usage"`, `"include_usage"`, `"Include_Usage"`, `"INCLUDE_USAGE"`, `"include\u005fusage"`}
	streamValues := []string{`true`, `true`, `false`, `null`, `"true"`}
	usageValues := []string{`true`, `false`, `null`, `"yes"`}
	others := []string{`"model":"gpt-4o"`, `"messages":[{"role":"user","content":"\"stream\":true"}]`, `"n":1`, `"metadata":{"stream":true}`}
	pick := func(s []string) string { return s[r.IntN(len(s))] }
	for range 5000 {
		var members []string
		for range r.IntN(3) {
			members = append(members, pick(streamKeys)+":"+pick(streamValues))
		}
		for range r.IntN(3) {
			var opts string
			switch r.IntN(5) {
			case 0:
				opts = pick([]string{`null`, `"x"`, `[]`, `true`})
			default:
				var inner []string
				for range r.IntN(3) {
					inner = append(inner, pick(usageKeys)+":"+pick(usageValues))
				}
				if r.IntN(2) == 0 {
					inner = append(inner, `"include_obfuscation":false`)
				}
				r.Shuffle(len(inner), func(i, j int) { inner[i], inner[j] = inner[j], inner[i] })
				opts = "{" + strings.Join(inner, ",") + "}"
			}
			members = append(members, pick(optionsKeys)+":"+opts)
		}
		for _, o := range others {
			if r.IntN(2) == 0 {
				members = append(members, o)
			}
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		body := []byte("{" + strings.Join(members, pick([]string{",", ", ", ",\n  "})) + "}")

		got, ok := AskForUsage(chatPath, body)
		if want := wantRewrite(t, body); ok != want {
			t.Fatalf("AskForUsage(%s) ok = %v, want %v (got %s)", body, ok, want, got)
		}
		if ok {
			checkRewrite(t, body, got)
		}
	}
}

// member is a member of a JSON object: its key as encoding/json decodes
// it, and its value's bytes.
type member struct {
	key   string
	value json.RawMessage
}

// objectMembers returns the members of the JSON object b, in order,
// duplicates included.
func objectMembers(t testing.TB, b []byte) []member {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %q (%v)", b, err)
	}
	var ms []member
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			t.Fatalf("key in %q: %v", b, err)
		}
		var m member
		m.key = tok.(string)
		if err := d.Decode(&m.value); err != nil {
			t.Fatalf("value in %q: %v", b, err)
		}
		ms = append(ms, m)
	}
	return ms
}

// wantRewrite says, for a valid JSON object, whether AskForUsage is to
// rewrite it: it streams at some parser (a member whose key folds to
// stream is true), it does not ask for the usage at every parser, and it
// is not a single stream_options of the wrong type or with include_usage
// of the wrong type (the upstream's error to report).
// laxTrue is whether pydantic's lax mode reads a JSON value as true: the
// boolean, the number 1, or one of its strings for true, in any case.
func laxTrue(t testing.TB, raw []byte) bool {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case bool:
		return v
	case float64:
		return v == 1
	case string:
		return slices.Contains([]string{"true", "1", "yes", "on", "t", "y"}, strings.ToLower(v))
	}
	return false
}

func wantRewrite(t testing.TB, body []byte) bool {
	t.Helper()
	streams, spelled := false, true
	nStream, nOptions := 0, 0
	asksEverywhere, optionsSpelled := true, false
	var options json.RawMessage
	for _, m := range objectMembers(t, body) {
		switch {
		case strings.EqualFold(m.key, "stream"):
			nStream++
			streams = streams || laxTrue(t, m.value)
			spelled = spelled && m.key == "stream"
		case strings.EqualFold(m.key, "stream_options"):
			nOptions++
			options = m.value
			spelled = spelled && m.key == "stream_options"
			optionsSpelled = optionsSpelled || m.key == "stream_options"
			asksEverywhere = asksEverywhere && asksAtEveryParser(t, m.value)
		}
	}
	switch {
	case !streams || asksEverywhere && optionsSpelled:
		return false
	case nStream > 1 || nOptions > 1 || !spelled || nOptions == 0:
		return true
	case string(options) == "null":
		return true
	case options[0] != '{':
		return false
	}
	var usage []member
	for _, m := range objectMembers(t, options) {
		if strings.EqualFold(m.key, "include_usage") {
			usage = append(usage, m)
		}
	}
	if len(usage) != 1 || usage[0].key != "include_usage" {
		return true
	}
	v := string(usage[0].value)
	return v == "false" || v == "null"
}

// asksAtEveryParser: an object with an include_usage spelled exactly, and
// every member whose key folds to include_usage true.
func asksAtEveryParser(t testing.TB, options json.RawMessage) bool {
	if options[0] != '{' {
		return false
	}
	asks, spelled := true, false
	for _, m := range objectMembers(t, options) {
		if strings.EqualFold(m.key, "include_usage") {
			asks = asks && string(m.value) == "true"
			spelled = spelled || m.key == "include_usage"
		}
	}
	return asks && spelled
}

// checkRewrite asserts that rewritten, the rewrite of the valid JSON object
// orig, asks for the usage at every parser and keeps everything else (see
// checkAsksEverywhere); and that a body without duplicates or keys in
// another case is edited in one place (checkOnlyIncludeUsageChanged).
func checkRewrite(t testing.TB, orig, rewritten []byte) {
	t.Helper()
	checkAsksEverywhere(t, orig, rewritten)
	plain := true
	var options []json.RawMessage
	nStream := 0
	for _, m := range objectMembers(t, orig) {
		switch {
		case strings.EqualFold(m.key, "stream"):
			nStream++
			plain = plain && m.key == "stream"
		case strings.EqualFold(m.key, "stream_options"):
			options = append(options, m.value)
			plain = plain && m.key == "stream_options"
		}
	}
	plain = plain && nStream == 1 && len(options) <= 1
	if plain && len(options) == 1 && options[0][0] == '{' {
		n := 0
		for _, m := range objectMembers(t, options[0]) {
			if strings.EqualFold(m.key, "include_usage") {
				n++
				plain = plain && m.key == "include_usage"
			}
		}
		plain = plain && n <= 1
	}
	if plain {
		checkOnlyIncludeUsageChanged(t, orig, rewritten)
	}
}

// checkAsksEverywhere asserts that rewritten is valid JSON with exactly one
// top-level member whose key folds to stream, spelled "stream" and true
// (or, kept as the client sent it, a value lax parsers take for true),
// and one that folds to stream_options, spelled exactly: an object with
// exactly one member whose key folds to include_usage, spelled exactly and
// true; that encoding/json reads it so; that every other member of orig
// is kept, in order, byte for byte; and that the other members of
// stream_options are those of orig's last object-valued stream_options.
func checkAsksEverywhere(t testing.TB, orig, rewritten []byte) {
	t.Helper()
	if !json.Valid(rewritten) {
		t.Fatalf("rewrite of %q is not JSON: %q", orig, rewritten)
	}
	m := decodeObject(t, rewritten)
	opts, _ := m["stream_options"].(map[string]any)
	stream, _ := json.Marshal(m["stream"])
	if !laxTrue(t, stream) || opts["include_usage"] != true {
		t.Fatalf("encoding/json does not read stream (laxly) and include_usage true in %s", rewritten)
	}

	var wantRest, wantOptions []member
	for _, m := range objectMembers(t, orig) {
		switch {
		case strings.EqualFold(m.key, "stream"):
		case strings.EqualFold(m.key, "stream_options"):
			if m.value[0] == '{' {
				wantOptions = withoutKey(objectMembers(t, m.value), "include_usage")
			}
		default:
			wantRest = append(wantRest, m)
		}
	}

	var rest, streams, options []member
	for _, m := range objectMembers(t, rewritten) {
		switch {
		case strings.EqualFold(m.key, "stream"):
			streams = append(streams, m)
		case strings.EqualFold(m.key, "stream_options"):
			options = append(options, m)
		default:
			rest = append(rest, m)
		}
	}
	if len(streams) != 1 || streams[0].key != "stream" || !laxTrue(t, streams[0].value) {
		t.Fatalf("not one \"stream\" that is true (to lax parsers at least) in %s", rewritten)
	}
	if len(options) != 1 || options[0].key != "stream_options" || options[0].value[0] != '{' {
		t.Fatalf("not one stream_options object in %s", rewritten)
	}
	var usage []member
	for _, m := range objectMembers(t, options[0].value) {
		if strings.EqualFold(m.key, "include_usage") {
			usage = append(usage, m)
		}
	}
	if len(usage) != 1 || usage[0].key != "include_usage" || string(usage[0].value) != "true" {
		t.Fatalf("not one \"include_usage\":true in %s", rewritten)
	}
	if !sameMembers(rest, wantRest) {
		t.Fatalf("other members changed\n orig: %s\n  got: %s", orig, rewritten)
	}
	if got := withoutKey(objectMembers(t, options[0].value), "include_usage"); !sameMembers(got, wantOptions) {
		t.Fatalf("other members of stream_options changed\n orig: %s\n  got: %s", orig, rewritten)
	}
}

func withoutKey(ms []member, key string) []member {
	var out []member
	for _, m := range ms {
		if !strings.EqualFold(m.key, key) {
			out = append(out, m)
		}
	}
	return out
}

func sameMembers(a, b []member) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || !bytes.Equal(a[i].value, b[i].value) {
			return false
		}
	}
	return true
}

// The duplicate path validates the body as the others do (no stack growth
// with the nesting), and takes time linear in the body however many
// duplicates it has.
func TestAskForUsageDuplicatesDeepAndMany(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"stream":false,"STREAM":true,"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	}
	if _, ok := AskForUsage(chatPath, nested(maxShallowOpeners+100)); !ok {
		t.Error("valid body nested 4196 deep not rewritten")
	}
	if _, ok := AskForUsage(chatPath, nested(20000)); ok {
		t.Error("body nested past encoding/json's limit rewritten")
	}
	open := []byte(`{"stream":true,"stream":true,"x":` + strings.Repeat("[", 1<<20))
	if _, ok := AskForUsage(chatPath, open); ok {
		t.Error("a million open brackets rewritten")
	}
	deepOptions := []byte(`{"stream":true,"stream_options":{"include_usage":false,"include_usage":false,"x":` +
		strings.Repeat(`{"a":`, 3000) + "1" + strings.Repeat("}", 3000) + `}}`)
	if got, ok := AskForUsage(chatPath, deepOptions); !ok {
		t.Error("deep stream_options not rewritten")
	} else {
		checkRewrite(t, deepOptions, got)
	}

	// A million duplicates in 16 MiB: each member is read a bounded number
	// of times (a quadratic rewrite would not end).
	var b strings.Builder
	b.WriteString(`{"stream":false`)
	for b.Len() < MaxBodyBytes-100 {
		b.WriteString(`,"stream":true,"Stream_Options":{"include_usage":false,"INCLUDE_USAGE":null}`)
	}
	b.WriteString(`,"model":"m"}`)
	got, ok := AskForUsage(chatPath, []byte(b.String()))
	if want := `{"stream":true,"stream_options":{"include_usage":true},"model":"m"}`; !ok || string(got) != want {
		t.Errorf("many duplicates: got %.100s, %v", got, ok)
	}
}
