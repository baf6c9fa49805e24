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
