package tokenusage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"strings"

	"github.com/tidwall/gjson"
)

// reference parses a whole body the slow, obvious way: it cuts the body
// into roots by its framing, decodes each root with encoding/json, and walks
// the paths of UsagePaths, TextPaths and countPaths. valid is false when
// some root is not JSON; the Parser's answer is then only required not to
// depend on where the body is cut.
func reference(body []byte) (u Usage, ok bool, text int64, valid bool) {
	var r refParser
	r.valid = true
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
	case trimmed[0] == '{' || trimmed[0] == '[':
		r.values(trimmed)
	case trimmed[0] == 0:
		r.messages(trimmed)
	default:
		r.events(body)
	}
	u, ok = r.usage.usage()
	return u, ok, r.text, r.valid
}

type refParser struct {
	usage rawUsage
	text  int64
	valid bool
}

// values reads a sequence of JSON values; a top-level array's elements are
// roots.
func (r *refParser) values(data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var v json.RawMessage
		err := dec.Decode(&v)
		if err == io.EOF {
			return
		}
		if err != nil {
			r.valid = false
			return
		}
		if v[0] == '[' {
			var elems []json.RawMessage
			if json.Unmarshal(v, &elems) != nil {
				r.valid = false
				return
			}
			for _, e := range elems {
				r.root(e)
			}
			continue
		}
		r.root(v)
	}
}

// events reads server-sent events: the data lines of each event, joined by
// newlines, are JSON values.
func (r *refParser) events(body []byte) {
	text := strings.ReplaceAll(strings.ReplaceAll(string(body), "\r\n", "\n"), "\r", "\n")
	var data []string
	flush := func() {
		if len(data) > 0 && strings.Join(data, "\n") != "[DONE]" { // OpenAI's last event is not JSON
			r.values([]byte(strings.Join(data, "\n")))
		}
		data = nil
	}
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "":
			flush()
		case line == "data":
			data = append(data, "")
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	flush()
}

// messages reads AWS event-stream messages; each payload holds JSON values.
func (r *refParser) messages(body []byte) {
	for len(body) >= 12 {
		total := binary.BigEndian.Uint32(body[0:4])
		headers := binary.BigEndian.Uint32(body[4:8])
		if total < 16 || total > maxMessageBytes || headers > total-16 || int(total) > len(body) {
			r.valid = false
			return
		}
		r.values(body[12+headers : total-4])
		body = body[total:]
	}
	if len(body) > 0 {
		r.valid = false
	}
}

// root walks one root from the tree's root.
func (r *refParser) root(v json.RawMessage) {
	var pending rawUsage
	r.walk(v, root, &pending)
	r.usage.merge(&pending)
}

func (r *refParser) walk(v json.RawMessage, n node, pending *rawUsage) {
	if n == nowhere {
		return
	}
	at := tree[n]
	switch v[0] {
	case '{':
		if at.usage {
			pending.apply(v)
			return
		}
		if !at.keys {
			if at.text {
				r.text += int64(len(v))
			}
			return
		}
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.Token() // {
		for dec.More() {
			k, _ := dec.Token()
			key := refPlainKey(v, dec.InputOffset(), k.(string))
			var val json.RawMessage
			if err := dec.Decode(&val); err != nil {
				panic(err)
			}
			r.walk(val, child(n, []byte(key)), pending)
		}
	case '[':
		if at.array == nowhere {
			if at.text {
				r.text += int64(len(v))
			}
			return
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			panic(err)
		}
		for _, e := range elems {
			r.walk(e, at.array, pending)
		}
	case '"':
		if at.text {
			r.text += refTextBytes(v)
		}
	default:
		if at.count != noField {
			pending.set(at.count, gjson.ParseBytes(v))
		}
	}
}

// refPlainKey returns key when it is written plainly in v, ending at end,
// and "" when it was written with escapes: such a key is none of the tree's.
func refPlainKey(v json.RawMessage, end int64, key string) string {
	raw := `"` + key + `"`
	if int(end) >= len(raw) && string(v[int(end)-len(raw):end]) == raw {
		return key
	}
	return ""
}

// refTextBytes counts a JSON string's text: each escape as the bytes it
// stands for (\uXXXX as 3).
func refTextBytes(raw json.RawMessage) int64 {
	s := raw[1 : len(raw)-1]
	var n int64
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			n++
			continue
		}
		i++
		if s[i] == 'u' {
			n += 3
			i += 4
		} else {
			n++
		}
	}
	return n
}
