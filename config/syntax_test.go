package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A configuration that is not JSON is refused with the line and column of
// the mistake, as the plugin logs it (the gateway hands it JSON): a
// trailing comma is pointed at, not the brace after it.
func TestInvalidJSONSaysWhere(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"{\n  \"rule_name\": \"r\",\n  \"redis\": {\"service_name\": \"redis.static\",},\n}",
			`invalid JSON at line 3, column 43: a comma after the last member of an object (JSON allows none)`},
		{"{\"a\": [1, 2,\n\t]}", `invalid JSON at line 1, column 12: a comma after the last element of an array (JSON allows none)`},
		{"{\n  \"rule_name\": \"r\"\n  \"redis\": {}\n}", `invalid JSON at line 3, column 3: invalid character '"' after object key:value pair`},
		{"{\"rule_name\": \"é\" x}", `invalid JSON at line 1, column 19: invalid character 'x' after object key:value pair`},
		{"{\"rule_name\":\n  \"r\",\n", `invalid JSON at line 2, column 7: the document ends before its last value does`},
		{"  \n ", `invalid JSON at line 1, column 1: the document is empty`},
		{``, `invalid JSON at line 1, column 1: the document is empty`},
		{withGlobal(``) + "\nx", `invalid JSON at line 2, column 1: invalid character 'x' after top-level value`},
	} {
		_, err := ParseString(tc.doc)
		require.Error(t, err, tc.doc)
		assert.Equal(t, tc.want, err.Error(), "%q", tc.doc)
		var fe *FieldError
		assert.ErrorAs(t, err, &fe, "still a FieldError of the whole document")

		se := CheckJSON([]byte(tc.doc))
		require.NotNil(t, se, tc.doc)
		assert.Equal(t, tc.want, se.Error(), "the tools' check says the same")
		line, col := position([]byte(tc.doc), se.Offset)
		assert.Equal(t, [2]int{se.Line, se.Column}, [2]int{line, col})
	}
	assert.Nil(t, CheckJSON([]byte(withGlobal(``))))

	// ParseDocument, which the plugin runs on what the gateway hands it,
	// says the same.
	_, err := ParseDocument([]byte("{\"_rules_\": [\n  {\"rule_name\": \"x\",}\n]}"))
	assert.EqualError(t, err, "invalid JSON at line 2, column 20: a comma after the last member of an object (JSON allows none)")
}

func TestPosition(t *testing.T) {
	doc := []byte("ab\ncé\n\nd")
	for offset, want := range map[int][2]int{0: {1, 1}, 2: {1, 3}, 3: {2, 1}, 6: {2, 3}, 7: {3, 1}, 8: {4, 1}, 9: {4, 2}, 99: {4, 2}, -1: {1, 1}} {
		line, col := position(doc, offset)
		assert.Equal(t, want, [2]int{line, col}, "offset %d", offset)
	}
	assert.Equal(t, 4, strings.Count(string(doc), "\n")+1)
}
