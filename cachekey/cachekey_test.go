package cachekey

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func subject(rule, typ, source, value string) string {
	return string(AppendSubject(nil, rule, typ, source, value))
}

func TestPlainPartsAreReadable(t *testing.T) {
	assert.Equal(t, "atrl:{chat|limit_by_header|x-api-key|sk-123}",
		subject("chat", "limit_by_header", "x-api-key", "sk-123"))
	assert.Equal(t, "atrl:{chat|global_threshold||}", subject("chat", "global_threshold", "", ""))
	assert.Equal(t, "atrl:{r|t|s|Bearer abc}", subject("r", "t", "s", "Bearer abc"), "spaces are printable")
}

func TestUnsafeValuesAreHashed(t *testing.T) {
	for _, value := range []string{
		strings.Repeat("a", MaxPartBytes+1),
		"with}brace", "with{brace", "pipe|inside", "new\nline", "nul\x00", "caf\xc3\xa9", "#looks-hashed",
	} {
		key := subject("r", "t", "s", value)
		require.True(t, strings.HasPrefix(key, "atrl:{r|t|s|#"), "%q gave %q", value, key)
		assert.Len(t, key, len("atrl:{r|t|s|#}")+hashedHexBytes)
		assert.Equal(t, 1, strings.Count(key, "{"))
		assert.Equal(t, 1, strings.Count(key, "}"))
	}
	assert.NotContains(t, subject("r", "t", "s", strings.Repeat("a", MaxPartBytes)), "#", "a part at the bound is kept")
}

func TestDistinctSubjectsNeverShareAKey(t *testing.T) {
	long := strings.Repeat("x", 100)
	cases := [][4]string{
		{"a", "b", "c", "d"}, {"a|b", "", "c", "d"}, {"a", "b|c", "", "d"}, {"a", "b", "c|d", ""},
		{"a", "b", "c", long}, {"a", "b", "c", long + "y"}, {"a", "b", "c", "#x"}, {"a", "b", "c", "x"},
		{"a", "b", "c", "d}"}, {"a", "b", "c", ""}, {"", "", "", ""},
	}
	seen := map[string][4]string{}
	for _, c := range cases {
		key := subject(c[0], c[1], c[2], c[3])
		if prev, dup := seen[key]; dup {
			t.Fatalf("%v and %v share key %q", prev, c, key)
		}
		seen[key] = c
	}
}

func FuzzSubjectKeys(f *testing.F) {
	f.Add("chat", "limit_by_header", "x-api-key", "sk-1", "sk-2")
	f.Add("r", "t", "s", "a|b", "a}b")
	f.Add("r", "t", "s", "#abc", "abc")
	f.Fuzz(func(t *testing.T, rule, typ, source, v1, v2 string) {
		k1 := AppendSubject(nil, rule, typ, source, v1)
		k2 := AppendSubject(nil, rule, typ, source, v2)
		if len(k1) > MaxSubjectBytes {
			t.Fatalf("key of %d bytes over the bound %d", len(k1), MaxSubjectBytes)
		}
		if (v1 == v2) != bytes.Equal(k1, k2) {
			t.Fatalf("values %q and %q gave keys %q and %q", v1, v2, k1, k2)
		}
		open := bytes.IndexByte(k1, '{')
		if open < 0 || bytes.IndexByte(k1[open+1:], '}') != len(k1)-open-2 {
			t.Fatalf("hash tag does not span the subject: %q", k1)
		}
	})
}
