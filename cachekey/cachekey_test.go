package cachekey

import (
	"bytes"
	"strconv"
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

// withModel is the key of a subject narrowed to a model.
func withModel(subjectKey, model string) string {
	return string(AppendModel([]byte(subjectKey), model))
}

func TestModelKeys(t *testing.T) {
	alice := subject("llm", "limit_by_per_consumer", "", "alice")
	assert.Equal(t, "atrl:{llm|limit_by_per_consumer||alice}:m:gpt-4o", withModel(alice, "gpt-4o"))
	assert.Equal(t, "atrl:{llm|global_threshold||}:m:claude-opus-4-20250514",
		withModel(subject("llm", "global_threshold", "", ""), "claude-opus-4-20250514"))
	assert.Equal(t, "atrl:{llm|limit_by_per_consumer||alice}:m:google/gemini-2.5-pro", withModel(alice, "google/gemini-2.5-pro"))
	assert.Equal(t, "atrl:{llm|limit_by_per_consumer||alice}:m:Qwen2.5 72B", withModel(alice, "Qwen2.5 72B"), "spaces are printable")
	assert.Equal(t, "atrl:{llm|limit_by_per_consumer||alice}:m:"+strings.Repeat("m", MaxPartBytes),
		withModel(alice, strings.Repeat("m", MaxPartBytes)), "a model at the bound is kept")

	// Hashed: what a part hashes, and a ':', which would run into the
	// suffixes the scripts append (":t60:<bucket>", ":c").
	for _, model := range []string{
		"models/gemini:generateContent", "gpt:t60", ":c", "a:", ":",
		strings.Repeat("m", MaxPartBytes+1), "#abc", "模型", "x}y", "x{y", "x|y", "new\nline",
	} {
		key := withModel(alice, model)
		require.True(t, strings.HasPrefix(key, alice+":m:#"), "%q gave %q", model, key)
		assert.Len(t, key, len(alice)+len(":m:#")+hashedHexBytes, model)
		assert.Equal(t, 3, strings.Count(key, ":"), "%q gave %q", model, key) // atrl:, :m:
	}
	assert.NotEqual(t, withModel(alice, "a:b"), withModel(alice, "a:c"))

	// A model's counters stay in its subject's slot.
	for _, model := range []string{"gpt-4o", "x}y", "{other}", "a:b"} {
		assert.Equal(t, Slot([]byte(alice)), Slot([]byte(withModel(alice, model))), model)
	}
}

// Once the scripts append a window's bucket or the leases' suffix, no two
// (subject, model) pairs, with or without a model, share a counter.
func TestSubjectsAndModelsNeverShareACounter(t *testing.T) {
	subjects := []string{subject("r", "t", "s", "a"), subject("r", "t", "s", "b"), subject("r", "t", "s", "a:m:x")}
	models := []string{"", "x", "x:x:1", "x:t60", "x:t60:1", "t60", "m", "m:x", "x:c", "c", strings.Repeat("x", 100), "#x", "a:m"}
	// The scripts' suffixes, and one that ends with another (as a charge id
	// holding ':' would): a ':' in a model written as is would let two
	// models meet there.
	suffixes := []string{":t60:1", ":t1:60", ":q60:1", ":c", ":x:1", ":a:1", ":x:1:t60:1"}
	seen := map[string]string{}
	for _, s := range subjects {
		var keys []string
		for _, suffix := range suffixes {
			keys = append(keys, s+suffix)
			for _, m := range models {
				keys = append(keys, withModel(s, m)+suffix)
			}
		}
		for i, k := range keys {
			what := s + " #" + strconv.Itoa(i)
			if prev, dup := seen[k]; dup {
				t.Fatalf("%s and %s share the counter %q", prev, what, k)
			}
			seen[k] = what
		}
	}
}

func FuzzSubjectKeys(f *testing.F) {
	f.Add("chat", "limit_by_header", "x-api-key", "sk-1", "sk-2", "gpt-4o", "gpt-4o-mini")
	f.Add("r", "t", "s", "a|b", "a}b", "", "x")
	f.Add("r", "t", "s", "#abc", "abc", "a:t60", "a")
	f.Add("llm", "limit_by_per_consumer", "", "alice", "alice", "m:x", "m")
	f.Fuzz(func(t *testing.T, rule, typ, source, v1, v2, m1, m2 string) {
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

		km1 := AppendModel(bytes.Clone(k1), m1)
		km2 := AppendModel(bytes.Clone(k2), m2)
		if len(km1) > MaxModelSubjectBytes {
			t.Fatalf("key of %d bytes over the bound %d", len(km1), MaxModelSubjectBytes)
		}
		if !bytes.HasPrefix(km1, k1) || Slot(km1) != Slot(k1) {
			t.Fatalf("model key %q is not in its subject %q's slot", km1, k1)
		}
		// The model part holds no ':', so where a script's suffix starts is
		// never in doubt.
		if tail := km1[len(k1):]; !bytes.HasPrefix(tail, []byte(ModelSeparator)) ||
			bytes.IndexByte(tail[len(ModelSeparator):], ':') >= 0 {
			t.Fatalf("model part of %q holds a ':'", km1)
		}
		same := v1 == v2 && m1 == m2
		for _, suffix := range []string{":t60:1", ":c"} {
			if same != bytes.Equal(append(bytes.Clone(km1), suffix...), append(bytes.Clone(km2), suffix...)) {
				t.Fatalf("(%q, %q) and (%q, %q) gave keys %q and %q", v1, m1, v2, m2, km1, km2)
			}
			for _, other := range []string{":t60:1", ":c", ":x:1"} {
				if bytes.Equal(append(bytes.Clone(km1), suffix...), append(bytes.Clone(k2), other...)) {
					t.Fatalf("model key %q%s is subject key %q%s", km1, suffix, k2, other)
				}
			}
		}
	})
}

// Parts reads back what AppendSubject wrote, hashed parts as the key holds
// them, and refuses keys that are not the limiter's.
func TestParts(t *testing.T) {
	long := strings.Repeat("v", MaxPartBytes+1)
	for _, p := range [][4]string{{"chat", "limit_by_per_header", "x-api-key", "sk-1"}, {"r", "global_threshold", "", ""}, {"r", "t", "s", long}} {
		key := string(AppendSubject(nil, p[0], p[1], p[2], p[3])) + ":t60:29533012"
		parts, tail, ok := Parts(key)
		if !ok || tail != ":t60:29533012" || parts[0] != p[0] || parts[1] != p[1] || parts[2] != p[2] {
			t.Fatalf("Parts(%q) = %q, %q, %v", key, parts, tail, ok)
		}
		if want := p[3]; len(want) <= MaxPartBytes && parts[3] != want || len(want) > MaxPartBytes && !strings.HasPrefix(parts[3], "#") {
			t.Fatalf("Parts(%q) value = %q", key, parts[3])
		}
	}
	for _, key := range []string{"atrl:vms", "atrl:{a|b|c}", "atrl:{a|b|c|d|e}:t60", "other:{a|b|c|d}", "atrl:{a|b|c|d"} {
		if _, _, ok := Parts(key); ok {
			t.Fatalf("Parts(%q): not a subject's key", key)
		}
	}
}
