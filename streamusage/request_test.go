package streamusage

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

const chatPath = "/v1/chat/completions"

func TestAskForUsage(t *testing.T) {
	tests := []struct {
		name string
		path string // chatPath when empty
		body string
		ok   bool
	}{
		// What the SDKs send.
		{"openai-node, stream last", "", `{"messages":[{"role":"user","content":"Say this is a test"}],"model":"gpt-4o","stream":true}`, true},
		{"openai-python spacing", "", `{"messages": [{"role": "user", "content": "Say this is a test"}], "model": "gpt-4o", "stream": true}`, true},
		{"stream first", "", `{"stream":true,"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"temperature":0.2}`, true},
		{"stream between", "", `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`, true},
		{"tools and nested stream keys", "", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"stream":{"type":"boolean"},"stream_options":{"type":"object"}}}}}],"stream":true}`, true},
		{"unicode", "", `{"model":"gpt-4o","messages":[{"role":"user","content":"Grüße, 日本語, emoji 😀, escaped \u00e9 \ud83d\ude00 \"quoted\""}],"stream":true}`, true},
		{"whitespace formatted", "", "{\n  \"model\": \"gpt-4o\",\n  \"stream\": true,\n  \"messages\": [\n    {\"role\": \"user\", \"content\": \"hi\"}\n  ]\n}", true},
		{"surrounding whitespace", "", " \n\t{\"model\":\"gpt-4o\",\"stream\":true}\n", true},
		{"empty messages", "", `{"stream":true}`, true},

		// stream_options shapes.
		{"include_usage false", "", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false},"messages":[]}`, true},
		{"include_usage null", "", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":null}}`, true},
		{"stream_options empty", "", `{"model":"gpt-4o","stream":true,"stream_options":{}}`, true},
		{"stream_options empty spaced", "", `{"model":"gpt-4o","stream":true,"stream_options":{ }}`, true},
		{"stream_options null", "", `{"model":"gpt-4o","stream":true,"stream_options":null,"n":1}`, true},
		{"include_obfuscation only", "", `{"model":"gpt-4o","stream":true,"stream_options":{"include_obfuscation":false}}`, true},
		{"include_obfuscation and false", "", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false}}`, true},
		{"include_usage false formatted", "", "{\n  \"stream\": true,\n  \"stream_options\": {\n    \"include_usage\": false\n  }\n}", true},
		{"stream_options before stream", "", `{"stream_options":{"include_usage":false},"stream":true}`, true},
		{"include_usage true already", "", `{"model":"gpt-4o","stream":true,"stream_options":{"include_usage":true}}`, false},
		{"include_usage string", "", `{"stream":true,"stream_options":{"include_usage":"true"}}`, false},
		{"include_usage number", "", `{"stream":true,"stream_options":{"include_usage":0}}`, false},
		{"include_usage object", "", `{"stream":true,"stream_options":{"include_usage":{}}}`, false},
		{"stream_options string", "", `{"stream":true,"stream_options":"include_usage"}`, false},
		{"stream_options array", "", `{"stream":true,"stream_options":[]}`, false},
		{"stream_options bool", "", `{"stream":true,"stream_options":true}`, false},

		// Not streaming.
		{"stream false", "", `{"model":"gpt-4o","stream":false,"messages":[]}`, false},
		{"stream string (lax parsers stream)", "", `{"model":"gpt-4o","stream":"true"}`, true},
		{"stream number (lax parsers stream)", "", `{"model":"gpt-4o","stream":1}`, true},
		{"stream string false", "", `{"model":"gpt-4o","stream":"false"}`, false},
		{"stream null", "", `{"model":"gpt-4o","stream":null}`, false},
		{"no stream", "", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, false},
		{"stream only nested", "", `{"model":"gpt-4o","metadata":{"stream":true},"messages":[{"stream":true}]}`, false},

		// Duplicate keys and keys in another case: see TestAskForUsageDuplicateKeys.
		{"duplicate stream false then true", "", `{"stream":false,"stream":true}`, true},
		{"duplicate stream both false", "", `{"stream":false,"stream":false}`, false},
		{"duplicate stream_options asking", "", `{"stream":true,"stream_options":{"include_usage":true},"stream_options":{"include_usage":true}}`, false},
		{"STREAM", "", `{"model":"m","STREAM":true}`, true},
		{"STREAM false", "", `{"model":"m","STREAM":false}`, false},

		// Escaped keys are the keys a parser reads.
		{"escaped stream key", "", `{"model":"m","str\u0065am":true}`, true},
		{"escaped stream_options key", "", `{"stream":true,"stream\u005foptions":{"include_usage":false}}`, true},
		{"escaped include_usage key", "", `{"stream":true,"stream_options":{"include\u005fusage":null,"x":1}}`, true},
		{"escaped include_usage true", "", `{"stream":true,"stream_options":{"include\u005fusage":true}}`, false},

		// Not a JSON object.
		{"empty", "", ``, false},
		{"whitespace", "", " \n", false},
		{"array", "", `[{"stream":true}]`, false},
		{"string", "", `"{\"stream\":true}"`, false},
		{"true", "", `true`, false},
		{"null", "", `null`, false},
		{"two objects", "", `{"stream":true}{"stream":true}`, false},
		{"single quotes", "", `{'stream':true}`, false},
		{"bare true key", "", `{stream:true}`, false},
		{"byte order mark", "", "\xef\xbb\xbf{\"stream\":true}", false},
		{"form encoded", "", `model=gpt-4o&stream=true`, false},

		// Paths.
		{"chat without prefix", "/chat/completions", `{"stream":true}`, true},
		{"legacy completions", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"Say this is a test","stream":true}`, true},
		{"query string", "/v1/chat/completions?trace=1&x=/v1/embeddings", `{"stream":true}`, true},
		{"azure deployment", "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21", `{"stream":true,"messages":[]}`, true},
		{"azure legacy", "/openai/deployments/instruct/completions?api-version=2024-10-21", `{"stream":true,"prompt":"x"}`, true},
		{"gateway prefix", "/llm/openai/v1/chat/completions", `{"stream":true}`, true},
		{"embeddings", "/v1/embeddings", `{"stream":true}`, false},
		{"responses", "/v1/responses", `{"stream":true}`, false},
		{"anthropic messages", "/v1/messages", `{"stream":true}`, false},
		{"trailing slash", "/v1/chat/completions/", `{"stream":true}`, false},
		{"longer last segment", "/v1/chat/completionsx", `{"stream":true}`, false},
		{"completions in query only", "/v1/models?next=/v1/completions", `{"stream":true}`, false},
		{"stored completion", "/v1/chat/completions/chatcmpl-abc", `{"stream":true}`, false},
		{"empty path", "/", `{"stream":true}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if path == "" {
				path = chatPath
			}
			body := []byte(tt.body)
			before := bytes.Clone(body)
			got, ok := AskForUsage(path, body)
			if !bytes.Equal(body, before) {
				t.Fatalf("body modified: %q", body)
			}
			if ok != tt.ok {
				t.Fatalf("AskForUsage(%q, %s) ok = %v, want %v (got %s)", path, tt.body, ok, tt.ok, got)
			}
			if !ok {
				if got != nil {
					t.Fatalf("not ok but returned %q", got)
				}
				return
			}
			checkRewrite(t, body, got)
		})
	}
}

// checkOnlyIncludeUsageChanged asserts, with encoding/json, that rewritten
// is orig with stream_options.include_usage set to true and nothing else
// changed, and that the bytes around the edit are orig's own.
func checkOnlyIncludeUsageChanged(t testing.TB, orig, rewritten []byte) {
	t.Helper()
	want := decodeObject(t, orig)
	switch opts := want["stream_options"].(type) {
	case map[string]any:
		opts["include_usage"] = true
	default: // absent or null
		want["stream_options"] = map[string]any{"include_usage": true}
	}
	got := decodeObject(t, rewritten)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rewritten body differs beyond include_usage\n orig: %s\n  got: %s", orig, rewritten)
	}

	// The edit is one place: removed at most `false`, added at most the
	// whole member. Whitespace around the object may go; compare without it.
	o, r := bytes.TrimSpace(orig), bytes.TrimSpace(rewritten)
	p := commonPrefix(o, r)
	s := commonPrefix(reversed(o[p:]), reversed(r[p:]))
	removed, added := o[p:len(o)-s], r[p:len(r)-s]
	if len(removed) > len("false") || len(added) > len(`,"stream_options":{"include_usage":true}`) {
		t.Fatalf("edit too wide: removed %q, added %q", removed, added)
	}
}

func decodeObject(t testing.TB, b []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	if d.More() {
		t.Fatalf("more after the object in %q", b)
	}
	return m
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func reversed(b []byte) []byte {
	r := make([]byte, len(b))
	for i, c := range b {
		r[len(b)-1-i] = c
	}
	return r
}

// A body that is not valid JSON, without stream_options, gets the member
// in front and is otherwise unchanged: the upstream refuses it as it would
// have (a lenient one reads the rest as it would have).
func TestAskForUsageInvalidBodiesOnlyGetTheMember(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o","stream":true`,
		`{"model":"gpt-4o","stream":true,}`,
		`{"stream":true} x`,
		"{\"stream\":true,\"a\":\"x\x01\"}",
	} {
		got, ok := AskForUsage(chatPath, []byte(body))
		if want := "{" + string(askForUsageMember) + body[1:]; !ok || string(got) != want {
			t.Errorf("AskForUsage(%q) = %q, %v; want %q", body, got, ok, want)
		}
	}
	// Where stream_options must be edited, an invalid body is left alone.
	if _, ok := AskForUsage(chatPath, []byte(`{"stream":true,"stream_options":{},}`)); ok {
		t.Error("an invalid body with stream_options edited")
	}
}

// The exact output for each stream_options shape, so that a change of
// sjson's behaviour shows.
func TestAskForUsageExactOutput(t *testing.T) {
	tests := []struct{ body, want string }{
		{`{"model":"m","stream":true}`, `{"stream_options":{"include_usage":true},"model":"m","stream":true}`},
		{" \n{ \"stream\" : true }", " \n{\"stream_options\":{\"include_usage\":true}, \"stream\" : true }"},
		{`{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":{}}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":true,"stream_options":{"include_usage":false},"n":1}`, `{"stream":true,"stream_options":{"include_usage":true},"n":1}`},
		{`{"stream":true,"stream_options":{"include_usage":null}}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream_options":{"include_obfuscation":false},"stream":true}`, `{"stream_options":{"include_obfuscation":false,"include_usage":true},"stream":true}`},
		{`{"stream": true, "stream_options": {"include_usage": false}}`, `{"stream": true, "stream_options": {"include_usage": true}}`},
	}
	for _, tt := range tests {
		got, ok := AskForUsage(chatPath, []byte(tt.body))
		if !ok || string(got) != tt.want {
			t.Errorf("AskForUsage(%s) = %s, %v; want %s", tt.body, got, ok, tt.want)
		}
	}
}

// Deep nesting overflows no stack; where stream_options has to be read
// and edited, a body nested past what encoding/json accepts is left alone.
func TestAskForUsageDeepNesting(t *testing.T) {
	nested := func(depth int) []byte {
		return []byte(`{"stream":true,"x":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`)
	}
	if _, ok := AskForUsage(chatPath, nested(maxShallowOpeners+100)); !ok {
		t.Error("valid body nested 4196 deep not rewritten")
	}
	if _, ok := AskForUsage(chatPath, nested(100)); !ok {
		t.Error("valid body nested 100 deep not rewritten")
	}
	deep := []byte(`{"stream":true,"stream_options":{},"x":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)
	if _, ok := AskForUsage(chatPath, deep); ok {
		t.Error("body nested past encoding/json's limit edited")
	}
	open := []byte(`{"stream":true,"stream_options":null,"x":` + strings.Repeat("[", 1<<20))
	if _, ok := AskForUsage(chatPath, open); ok {
		t.Error("a million open brackets edited")
	}
	// Without stream_options, the member is only put in front.
	open = []byte(`{"stream":true,"x":` + strings.Repeat("[", 1<<20))
	if got, ok := AskForUsage(chatPath, open); !ok || !bytes.Equal(got[len(askForUsageMember)+1:], open[1:]) {
		t.Error("a million open brackets: not asked with the member in front")
	}
	// Many brackets that are not deep: still valid.
	wide := `{"stream":true,"x":[` + strings.Repeat(`[],`, 10000) + `[]]}`
	if _, ok := AskForUsage(chatPath, []byte(wide)); !ok {
		t.Error("wide body not rewritten")
	}
}

func TestAskForUsageBodyLimit(t *testing.T) {
	prefix := `{"stream":true,"pad":"`
	fits := []byte(prefix + strings.Repeat("a", MaxBodyBytes-len(prefix)-2) + `"}`)
	if len(fits) != MaxBodyBytes {
		t.Fatal(len(fits))
	}
	if _, ok := AskForUsage(chatPath, fits); !ok {
		t.Error("body of MaxBodyBytes not rewritten")
	}
	over := []byte(prefix + strings.Repeat("a", MaxBodyBytes-len(prefix)-1) + `"}`)
	if _, ok := AskForUsage(chatPath, over); ok {
		t.Error("body over MaxBodyBytes rewritten")
	}
}

// MayAskForUsage takes every POST to a completions path, whatever its
// Content-Type: the body decides (TestAskForUsageWhateverTheContentType).
func TestMayAskForUsage(t *testing.T) {
	tests := []struct {
		method, path string
		want         bool
	}{
		{"POST", "/v1/chat/completions", true},
		{"POST", "/v1/completions", true},
		{"POST", "/openai/deployments/d/chat/completions?api-version=2024-10-21", true},
		{"GET", "/v1/chat/completions", false},
		{"post", "/v1/chat/completions", false},
		{"PUT", "/v1/chat/completions", false},
		{"POST", "/v1/embeddings", false},
		{"POST", "/v1/responses", false},
	}
	for _, tt := range tests {
		if got := MayAskForUsage(tt.method, tt.path); got != tt.want {
			t.Errorf("MayAskForUsage(%q, %q) = %v, want %v", tt.method, tt.path, got, tt.want)
		}
	}
}

// Issue 35, point 8: a stream member that lax parsers (pydantic's, in
// vLLM and LiteLLM) take for true streams there: it is asked for its
// usage; one they take for false is left alone.
func TestAskForUsageTruthyStream(t *testing.T) {
	for _, tt := range []struct {
		body, want string // want "": left as it is
	}{
		{`{"stream":"true","messages":[]}`, `{"stream_options":{"include_usage":true},"stream":"true","messages":[]}`},
		{`{"stream":1,"messages":[]}`, `{"stream_options":{"include_usage":true},"stream":1,"messages":[]}`},
		{`{"stream":1.0}`, `{"stream_options":{"include_usage":true},"stream":1.0}`},
		{`{"stream":"YES"}`, `{"stream_options":{"include_usage":true},"stream":"YES"}`},
		{`{"stream":"on","stream_options":{"include_obfuscation":false}}`, `{"stream":"on","stream_options":{"include_obfuscation":false,"include_usage":true}}`},
		{`{"Stream":"1"}`, `{"stream":true,"stream_options":{"include_usage":true}}`},
		{`{"stream":"false"}`, ``},
		{`{"stream":0}`, ``},
		{`{"stream":2}`, ``},
		{`{"stream":"maybe"}`, ``},
		{`{"stream":null}`, ``},
	} {
		got, ok := AskForUsage(chatPath, []byte(tt.body))
		if ok != (tt.want != "") || string(got) != tt.want {
			t.Errorf("AskForUsage(%s) = %s, %v; want %s", tt.body, got, ok, tt.want)
		}
	}
}

// Property: for bodies built from random members in random order, the
// rewrite happens exactly when the rules say and changes only include_usage.
func TestAskForUsageRandomBodies(t *testing.T) {
	r := newRand(1)
	streams := []string{`true`, `false`, `"true"`, `1`, `"no"`, `null`, ``}
	options := []string{``, `null`, `{}`, `{"include_usage":false}`, `{"include_usage":true}`, `{"include_usage":null}`,
		`{"include_obfuscation":true}`, `{"include_obfuscation":false,"include_usage":false}`, `"x"`, `[]`}
	others := []string{
		`"model":"gpt-4o"`, `"messages":[{"role":"user","content":"hi \"stream\":true"}]`, `"temperature":0.7`,
		`"max_tokens":100`, `"n":1`, `"metadata":{"stream":true,"stream_options":null}`, `"user":"üser"`, `"tools":[]`,
	}
	for range 2000 {
		var members []string
		stream, opts := streams[r.IntN(len(streams))], options[r.IntN(len(options))]
		if stream != "" {
			members = append(members, `"stream":`+stream)
		}
		if opts != "" {
			members = append(members, `"stream_options":`+opts)
		}
		for _, o := range others {
			if r.IntN(2) == 0 {
				members = append(members, o)
			}
		}
		r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		sep := []string{",", ", ", ",\n  "}[r.IntN(3)]
		body := []byte("{" + strings.Join(members, sep) + "}")

		want := (stream == "true" || stream == `"true"` || stream == "1") && (opts == "" || opts == "null" ||
			strings.HasPrefix(opts, "{") && !strings.Contains(opts, `"include_usage":true`))
		got, ok := AskForUsage(chatPath, body)
		if ok != want {
			t.Fatalf("AskForUsage(%s) ok = %v, want %v", body, ok, want)
		}
		if ok {
			checkOnlyIncludeUsageChanged(t, body, got)
		}
	}
}

func FuzzAskForUsage(f *testing.F) {
	for _, s := range []string{
		`{"stream":true}`, `{"stream":true,"stream_options":{"include_usage":false}}`,
		`{"stream":true,"stream_options":null}`, `{"messages":[],"stream":true,"stream_options":{"x":1}}`,
		`{"stream":false}`, `[`, ``, `{"stream":true,"stream":true}`,
		`{"stream":false,"STREAM":true,"stream_options":{"include_usage":true,"Include_Usage":false,"include_obfuscation":true}}`,
		`{"\u017ftream":true,"stream_options":{"a":1},"Stream_Options":null}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		checkEachMember(t, body)
		got, ok := AskForUsage(chatPath, []byte(body))
		valid := json.Valid([]byte(body)) && isObject([]byte(body))
		if !ok {
			if valid && wantRewrite(t, []byte(body)) {
				t.Fatalf("AskForUsage(%s) left it untouched", body)
			}
			return
		}
		if !valid {
			// Only ever the member put in front.
			if i := strings.IndexByte(body, '{') + 1; string(got) != body[:i]+string(askForUsageMember)+body[i:] {
				t.Fatalf("rewrite of invalid %q is not the member in front: %q", body, got)
			}
			return
		}
		if !wantRewrite(t, []byte(body)) {
			t.Fatalf("AskForUsage(%s) rewrote it: %s", body, got)
		}
		checkRewrite(t, []byte(body), got)
	})
}

// checkEachMember: the members eachMember reads, when it reads a body
// whole, are gjson's, key for key and value for value; and it reads every
// valid object whose keys have no escapes and that nests at most 63 deep.
func checkEachMember(t *testing.T, body string) {
	t.Helper()
	var fast, slow [][2]string
	whole := eachMember(body, func(key, raw string) { fast = append(fast, [2]string{key, raw}) })
	if !whole {
		plain := json.Valid([]byte(body)) && isObject([]byte(body)) && !strings.Contains(body, `\`) && strings.Count(body, "{")+strings.Count(body, "[") <= 63
		if plain {
			t.Fatalf("eachMember did not read %q", body)
		}
		return
	}
	gjson.Parse(body).ForEach(func(key, value gjson.Result) bool {
		slow = append(slow, [2]string{key.Str, value.Raw})
		return true
	})
	if !slices.Equal(fast, slow) {
		t.Fatalf("%q: eachMember read %q, gjson %q", body, fast, slow)
	}
	if !json.Valid([]byte(body)) {
		t.Fatalf("eachMember read %q whole, which is not JSON", body)
	}
}

func TestEachMember(t *testing.T) {
	for _, body := range []string{
		string(chatBody(4 << 10)), `{}`, ` { } `, `{"a":1}`, `{"stream":true,"stream":false,"x":{"y":[1,{"z":null}]}}`,
		"{\n\t\"stream\" : true ,\r\n\"messages\":[]\n}\n",
		`{"a":1,}`, `{"a" 1}`, `{"a":1}x`, `{"\u0073tream":true}`, `{"a":tru}`, `{"a":1`, `[1]`, `{"a":"\"}`,
	} {
		checkEachMember(t, body)
	}
	if !eachMember(string(chatBody(4<<10)), func(string, string) {}) {
		t.Fatal("a chat body is not read by eachMember")
	}
}
