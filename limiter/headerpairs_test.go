package limiter_test

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tokenlimit/ai-token-ratelimit/limiter"
)

// serializeHeaders writes headers as proxy-wasm's host does for
// proxy_get_header_map_pairs.
func serializeHeaders(headers [][2]string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(headers)))
	for _, h := range headers {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h[0])))
		b = binary.LittleEndian.AppendUint32(b, uint32(len(h[1])))
	}
	for _, h := range headers {
		b = append(append(append(append(b, h[0]...), 0), h[1]...), 0)
	}
	return b
}

// In WASM mode, the priority header's lines are read from the host's copy
// of the whole map: every line of it, in order, whatever its case; a map
// cut short (or with sizes past its end) is read as far as it goes.
func TestEachHeaderValueReadsEveryLine(t *testing.T) {
	m := serializeHeaders([][2]string{{":path", "/v1"}, {"x-priority", "high"}, {"x-other", "x"}, {"X-Priority", "low"}, {"x-priority", ""}})
	assert.Equal(t, []string{"high", "low", ""}, limiter.EachHeaderValue(m, "x-priority"))
	assert.Nil(t, limiter.EachHeaderValue(m, "x-prio"))
	for n := range len(m) {
		values := limiter.EachHeaderValue(m[:n], "x-priority")
		assert.LessOrEqual(t, len(values), 2, "cut at %d", n)
	}
	huge := binary.LittleEndian.AppendUint32(nil, 1<<31)
	assert.Nil(t, limiter.EachHeaderValue(append(huge, make([]byte, 16)...), "x-priority"))
	bad := serializeHeaders([][2]string{{"x-priority", "high"}})
	binary.LittleEndian.PutUint32(bad[8:], 1<<30) // the value's size, past the end
	assert.Nil(t, limiter.EachHeaderValue(bad, "x-priority"))
	assert.Nil(t, limiter.EachHeaderValue(nil, "x-priority"))
}
