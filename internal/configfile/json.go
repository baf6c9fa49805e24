package configfile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/goccy/go-yaml"
)

// jsonError is a YAML value that has no JSON form, at path in its
// configuration.
type jsonError struct {
	path []step
	msg  string
}

func (e *jsonError) Error() string {
	if len(e.path) == 0 {
		return e.msg
	}
	return pathString(e.path) + ": " + e.msg
}

// writeJSON writes a decoded YAML value as JSON, mappings in the file's
// order (so that the plugin, which reports the first of several mistakes
// in document order, reports the first in the file), keys that are not
// strings written as text.
func writeJSON(b *bytes.Buffer, v any, path []step) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case yaml.MapSlice:
		b.WriteByte('{')
		for i, item := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			k := keyText(item.Key)
			if err := writeScalar(b, k, path); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := writeJSON(b, item.Value, append(path, step{key: k})); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case map[string]any: // not from goccy with UseOrderedMap, kept for safety
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		m := make(yaml.MapSlice, 0, len(v))
		for _, k := range keys {
			m = append(m, yaml.MapItem{Key: k, Value: v[k]})
		}
		return writeJSON(b, m, path)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e, append(path, step{index: i, isIndex: true})); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return &jsonError{slices.Clone(path), fmt.Sprintf("%v is no JSON number (JSON numbers are finite)", v)}
		}
		return writeScalar(b, v, path)
	default:
		return writeScalar(b, v, path)
	}
	return nil
}

// writeScalar writes a value with encoding/json, HTML characters as they
// are.
func writeScalar(b *bytes.Buffer, v any, path []step) error {
	var s bytes.Buffer
	enc := json.NewEncoder(&s)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return &jsonError{slices.Clone(path), fmt.Sprintf("%v has no JSON form: %v", v, err)}
	}
	b.Write(bytes.TrimSuffix(s.Bytes(), []byte{'\n'}))
	return nil
}
