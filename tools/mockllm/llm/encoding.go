package llm

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// A request body in a Content-Encoding is read decoded, as the providers'
// APIs read it: gzip (or x-gzip), deflate (zlib-wrapped as HTTP says, or
// raw deflate, which some clients send) and identity. Another coding, or
// several, is answered 415 with Accept-Encoding naming the ones read; a
// body that does not decode, 400; one that decodes to more than
// maxBodyBytes, 413. The usage reported without x-mock-usage counts the
// decoded body.

// acceptedEncodings is what a 415 says the mock reads.
const acceptedEncodings = "gzip, deflate"

// bodyError is a request body the mock cannot read: the status and the
// message of its answer.
type bodyError struct {
	status int
	msg    string
}

// decodeBody returns a request body decoded from its Content-Encoding
// (the header's values, joined as one list).
func decodeBody(contentEncoding []string, raw []byte) ([]byte, *bodyError) {
	coding := strings.ToLower(strings.TrimSpace(strings.Join(contentEncoding, ",")))
	var decoded []byte
	var err error
	switch coding {
	case "", "identity":
		return raw, nil
	case "gzip", "x-gzip":
		var zr *gzip.Reader
		if zr, err = gzip.NewReader(bytes.NewReader(raw)); err == nil {
			decoded, err = readAtMost(zr)
		}
	case "deflate":
		var zr io.ReadCloser
		if zr, err = zlib.NewReader(bytes.NewReader(raw)); err == nil {
			decoded, err = readAtMost(zr)
		}
		if err != nil && err != errInflatedTooLarge {
			// Not zlib: raw deflate, as some clients send it.
			if plain, rawErr := readAtMost(flate.NewReader(bytes.NewReader(raw))); rawErr == nil || rawErr == errInflatedTooLarge {
				decoded, err = plain, rawErr
			}
		}
	default:
		return nil, &bodyError{http.StatusUnsupportedMediaType, fmt.Sprintf(
			"Content-Encoding %q is not supported: send the body uncompressed, or in one of %s", coding, acceptedEncodings)}
	}
	switch {
	case err == errInflatedTooLarge:
		return nil, &bodyError{http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"the request body decompresses to more than %d bytes", maxBodyBytes)}
	case err != nil:
		return nil, &bodyError{http.StatusBadRequest, fmt.Sprintf(
			"the request body is not valid %s (Content-Encoding: %s): %v", coding, coding, err)}
	}
	return decoded, nil
}

// errInflatedTooLarge is a body that decompresses past maxBodyBytes.
var errInflatedTooLarge = fmt.Errorf("decompresses to more than %d bytes", maxBodyBytes)

// readAtMost reads a decompressor to its end, at most maxBodyBytes of it.
func readAtMost(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	if err == nil && len(b) > maxBodyBytes {
		return nil, errInflatedTooLarge
	}
	return b, err
}
