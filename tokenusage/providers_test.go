package tokenusage

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
)

// bedrockStreamFixture names the Bedrock ConverseStream body, which is
// binary (AWS event-stream framing) and so is built here from its events'
// JSON payloads, as documented for ConverseStream.
const bedrockStreamFixture = "bedrock ConverseStream (built by bedrockConverseStream)"

func bedrockConverseStream() []byte {
	var body []byte
	for _, e := range []struct{ event, payload string }{
		{"messageStart", `{"role":"assistant"}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"Hel"}}`},
		{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"lo, \"usage\":{\"inputTokens\":9}"}}`},
		{"contentBlockDelta", `{"contentBlockIndex":1,"delta":{"toolUse":{"input":"{\"usage\": {\"outputTokens\": 7}}"}}}`},
		{"contentBlockStop", `{"contentBlockIndex":0}`},
		{"messageStop", `{"stopReason":"end_turn"}`},
		{"metadata", `{"usage":{"inputTokens":25,"outputTokens":5,"totalTokens":230,"cacheWriteInputTokens":200},"metrics":{"latencyMs":400}}`},
	} {
		body = append(body, eventStreamMessage(e.event, e.payload)...)
	}
	return body
}

// eventStreamMessage encodes one AWS event-stream message: prelude (total
// length, headers length, CRC), headers (name, type 7 = string, value),
// payload, message CRC.
func eventStreamMessage(eventType, payload string) []byte {
	var headers []byte
	for _, h := range [][2]string{{":event-type", eventType}, {":content-type", "application/json"}, {":message-type", "event"}} {
		headers = append(headers, byte(len(h[0])))
		headers = append(headers, h[0]...)
		headers = append(headers, 7)
		headers = binary.BigEndian.AppendUint16(headers, uint16(len(h[1])))
		headers = append(headers, h[1]...)
	}
	total := 12 + len(headers) + len(payload) + 4
	msg := binary.BigEndian.AppendUint32(nil, uint32(total))
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(headers)))
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg))
	msg = append(msg, headers...)
	msg = append(msg, payload...)
	return binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg))
}

// TestReferenceAgrees checks the Parser against the reference, which
// decodes each root whole, on every fixture and every forged body: the
// same usage and the same count of output text.
func TestReferenceAgrees(t *testing.T) {
	var bodies [][]byte
	for _, fx := range fixtures {
		bodies = append(bodies, readFixture(t, fx.file))
	}
	for _, fb := range forgedBodies {
		bodies = append(bodies, []byte(fb.body))
	}
	for _, body := range bodies {
		want, wantOK, wantText, valid := reference(body)
		if !valid {
			t.Fatalf("%.60q: the reference finds it is not JSON", body)
		}
		var p Parser
		p.Write(body)
		p.Finish()
		got, ok := p.Usage()
		if got != want || ok != wantOK || p.TextBytes() != wantText {
			t.Errorf("%.60q: got %+v (%v), %d text bytes; the reference %+v (%v), %d", body, got, ok, p.TextBytes(), want, wantOK, wantText)
		}
	}
}

func TestTextBytes(t *testing.T) {
	for _, c := range []struct {
		body string
		want int64
	}{
		{`data: {"choices":[{"delta":{"content":"héllo"}}],"usage":null}` + "\n\n", 6},
		{`data: {"choices":[{"delta":{"content":"a\"b\\c\n\u4f60"}}]}` + "\n\n", 6 + 3},
		{`data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]}}]}` + "\n\n", 7},
		{`{"type":"response.output_text.delta","delta":"Hi there"}`, 8},
		{`{"type":"content_block_delta","delta":{"type":"input_json_delta","partial_json":"{\"x\": 1"}}`, 7},
		{`{"candidates":[{"content":{"parts":[{"text":"ab"},{"functionCall":{"name":"f","args":{"k":"v"}}}]}}]}`, 2 + 9},
		{`{"message":{"content":"ab"},"response":"cd","thinking":"ef"}`, 6},
		// Echoes and metadata are not output.
		{`{"type":"response.output_text.done","text":"Hi there"}`, 0},
		{`{"id":"chatcmpl-1","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant"}}]}`, 0},
	} {
		for cut := range len(c.body) + 1 {
			var p Parser
			p.Write([]byte(c.body[:cut]))
			p.Write([]byte(c.body[cut:]))
			if got := p.TextBytes(); got != c.want {
				t.Fatalf("%s cut at %d: %d text bytes, want %d", c.body, cut, got, c.want)
			}
		}
	}
}
