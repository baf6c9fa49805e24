package estimate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// Issue 37's first step: a body served by another model names it, every
// other byte as it was; a body an upstream could read another model from is
// not rewritten.
func TestReplaceModel(t *testing.T) {
	for _, tc := range []struct{ body, value string }{
		{`{"model":"gpt-4o","messages":[{"role":"user","content":"Hi"}]}`, `"gpt-4o"`},
		{"{\n  \"messages\": [],\n  \"model\" : \"gpt-4o\" ,\n  \"stream\": true\n}", `"gpt-4o"`},
		{`{"x":{"model":"nested, not the request's"},"model":"gpt-\u0034o"}`, `"gpt-\u0034o"`},
	} {
		out, ok := ReplaceModel([]byte(tc.body), `gpt-4o-mini "quoted"`)
		assert.True(t, ok, tc.body)
		var parsed struct{ Model string }
		assert.NoError(t, json.Unmarshal(out, &parsed))
		assert.Equal(t, `gpt-4o-mini "quoted"`, parsed.Model, "as Go's encoding/json reads it")
		// Everything else byte for byte.
		i := strings.LastIndex(tc.body, tc.value)
		assert.Equal(t, tc.body[:i]+`"gpt-4o-mini \"quoted\""`+tc.body[i+len(tc.value):], string(out))
	}
	for _, refused := range []string{
		``, `[]`, `"model"`, `{"messages":[]}`,
		`{"model":"a","model":"b"}`,      // a duplicate
		`{"model":"a","MODEL":"b"}`,      // a key in another letter case (encoding/json reads it)
		`{"\u006dodel":"a","model":"a"}`, // an escaped key
		`{"model":null}`, `{"model":["a"]}`,
		`{"model":"a"} x`, `{"model":"a",}`, "\xef\xbb\xbf{\"model\":\"a\"}", `{"model":"a"`,
	} {
		_, ok := ReplaceModel([]byte(refused), "m")
		assert.False(t, ok, refused)
	}
	out, ok := ReplaceModel([]byte(`{"model":"a"}`), "ctl\x01")
	assert.True(t, ok)
	assert.Equal(t, `{"model":"ctl\u0001"}`, string(out))
}

// A Gemini or Vertex AI path served by another model names it; a path that
// names none, or that readers could decode otherwise, is not rewritten.
func TestReplacePathModel(t *testing.T) {
	for path, want := range map[string]string{
		"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse":                                  "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
		"/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent": "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent",
		"/v1beta/models/models/gemini-2.5-pro:countTokens":                                             "/v1beta/models/models/gemini-2.5-flash:countTokens",
	} {
		out, ok := ReplacePathModel(path, "gemini-2.5-flash")
		assert.True(t, ok, path)
		assert.Equal(t, want, out)
		assert.Equal(t, "gemini-2.5-flash", ModelFromPath(out))
	}
	for _, path := range []string{"/v1/chat/completions", "/v1/models/gpt-4o", "/v1beta/models/gemini%2D2.5:generateContent",
		"/v1beta/models/:generateContent", "/v1beta/models/g:generateContent"} {
		_, ok := ReplacePathModel(path, "gemini-2.5-flash")
		assert.Equal(t, path == "/v1beta/models/g:generateContent", ok, path)
	}
	for _, model := range []string{"", "a/b", "a:b", "a?b", "a%2F"} {
		_, ok := ReplacePathModel("/v1beta/models/g:generateContent", model)
		assert.False(t, ok, model)
	}
}

func FuzzReplacePathModel(f *testing.F) {
	f.Add("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini-2.5-flash")
	f.Add("/a/models/x/models/y:m/z#f", "m")
	f.Fuzz(func(t *testing.T, path, model string) {
		if out, ok := ReplacePathModel(path, model); ok && ModelFromPath(out) != model {
			t.Fatalf("%q -> %q names %q, not %q", path, out, ModelFromPath(out), model)
		}
	})
}
