package llm

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// compress returns plain in a content coding: gzip, deflate (zlib, as
// HTTP says) or raw deflate.
func compress(t *testing.T, coding string, plain []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w = gzip.NewWriter(&b)
	case "deflate":
		w = zlib.NewWriter(&b)
	case "raw deflate":
		fw, err := flate.NewWriter(&b, flate.DefaultCompression)
		require.NoError(t, err)
		w = fw
	default:
		t.Fatalf("no coding %q", coding)
	}
	_, err := w.Write(plain)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return b.Bytes()
}

// Issue 52, point 4: a compressed request body is read as the providers'
// APIs read it, decoded: the same answer and the same usage as the body
// sent plain (without x-mock-usage, input is the decoded body's size / 4),
// where it was once a 400 (invalid character '\x1f').
func TestCompressedBodiesAreReadDecoded(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	plain := []byte(`{"model":"m","max_tokens":7,"messages":[{"role":"user","content":"` + strings.Repeat("hello ", 200) + `"}]}`)
	wantInput := int64(len(plain) / bytesPerInputToken)

	resp, body := post(t, srv.URL+"/v1/chat/completions", string(plain))
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Equal(t, wantInput, gjson.Get(body, "usage.prompt_tokens").Int())

	for _, c := range []struct{ coding, header string }{
		{"gzip", "gzip"}, {"gzip", "x-gzip"}, {"gzip", "GZIP"},
		{"deflate", "deflate"}, {"raw deflate", "deflate"},
	} {
		sent := compress(t, c.coding, plain)
		require.Less(t, len(sent), len(plain)/4, "%s compresses", c.coding)
		resp, body := post(t, srv.URL+"/v1/chat/completions", string(sent), "Content-Encoding", c.header)
		require.Equal(t, 200, resp.StatusCode, "%s as %s: %s", c.coding, c.header, body)
		assert.Equal(t, "m", gjson.Get(body, "model").String(), "%s: the model read from the decoded body", c.coding)
		assert.Equal(t, wantInput, gjson.Get(body, "usage.prompt_tokens").Int(), "%s: the decoded body's size, not the %d bytes sent", c.coding, len(sent))
		assert.Equal(t, int64(7), gjson.Get(body, "usage.completion_tokens").Int(), "%s: max_tokens read", c.coding)
	}

	// Gemini and Anthropic read it too: the decoding is the mock's, not a shape's.
	resp, body = post(t, srv.URL+"/v1/messages", string(compress(t, "deflate", plain)), "Content-Encoding", "deflate")
	require.Equal(t, 200, resp.StatusCode, body)
	assert.Equal(t, wantInput, gjson.Get(body, "usage.input_tokens").Int())
}

func TestCompressedBodiesTheMockCannotRead(t *testing.T) {
	srv := httptest.NewServer(New(Options{}))
	defer srv.Close()
	plain := []byte(`{"model":"m","messages":[]}`)

	// Another coding, or several: 415, naming the codings it reads.
	for _, coding := range []string{"br", "zstd", "gzip, gzip"} {
		resp, body := post(t, srv.URL+"/v1/chat/completions", string(plain), "Content-Encoding", coding)
		assert.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode, coding)
		assert.Equal(t, "gzip, deflate", resp.Header.Get("Accept-Encoding"), coding)
		assert.Equal(t, "invalid_request_error", gjson.Get(body, "error.type").String(), body)
		assert.Equal(t, `Content-Encoding "`+coding+`" is not supported: send the body uncompressed, or in one of gzip, deflate`,
			gjson.Get(body, "error.message").String())
	}

	// A body that is not what its coding says: 400, saying so.
	gz := compress(t, "gzip", plain)
	for _, c := range []struct {
		coding string
		body   []byte
	}{
		{"gzip", plain},                     // not compressed at all
		{"gzip", gz[:len(gz)-6]},            // cut short
		{"deflate", []byte("\xff\xfe\xfd")}, // neither zlib nor raw deflate
	} {
		resp, body := post(t, srv.URL+"/v1/chat/completions", string(c.body), "Content-Encoding", c.coding)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %q", c.coding, c.body)
		assert.Contains(t, gjson.Get(body, "error.message").String(), "the request body is not valid "+c.coding+" (Content-Encoding: "+c.coding+"): ")
	}

	// A bomb: 9 MiB of zeros in a few KB, refused once 8 MiB are inflated.
	bomb := compress(t, "gzip", make([]byte, 9<<20))
	require.Less(t, len(bomb), 64<<10)
	resp, body := post(t, srv.URL+"/v1/chat/completions", string(bomb), "Content-Encoding", "gzip")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode)
	assert.Equal(t, "the request body decompresses to more than 8388608 bytes", gjson.Get(body, "error.message").String())
	resp, body = post(t, srv.URL+"/v1/chat/completions", string(compress(t, "raw deflate", make([]byte, 9<<20))), "Content-Encoding", "deflate")
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, body)
}
