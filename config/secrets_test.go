package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A fingerprint shows a few bytes at most, a scheme in front, and a hash
// that names one value.
func TestFingerprint(t *testing.T) {
	require.Equal(t, "sk-l...#", Fingerprint("sk-live-0123456789abcdef")[:8])
	require.Len(t, Fingerprint("sk-live-0123456789abcdef"), len("sk-l...#")+8)
	require.Equal(t, Fingerprint("sk-live-0123456789abcdef"), Fingerprint("sk-live-0123456789abcdef"))
	require.NotEqual(t, Fingerprint("sk-live-0123456789abcdef"), Fingerprint("sk-live-0123456789abcdeg"))
	require.True(t, strings.HasPrefix(Fingerprint("Bearer sk-proj-0123456789"), "Bearer sk-p...#"))
	require.True(t, strings.HasPrefix(Fingerprint("k1"), "...#"), "a short value shows none of its bytes")
	require.True(t, strings.HasPrefix(Fingerprint("abcdefgh"), "ab...#"), "a quarter at most")
	require.True(t, strings.HasPrefix(Fingerprint("my secret key value"), "...#"), "only a registered scheme is kept whole, and only printable bytes are shown")
	require.True(t, strings.HasPrefix(Fingerprint("\x00\x01\x02\x03ab\xff\xfe\x00\x00\x00\x00\x00\x00\x00\x00"), "...#"))
}

// The items that read a credential: the SDKs' key headers, cookies, keys
// in the query, and what secret_headers and secret_params add; a
// consumer's name and a client IP are not.
func TestSecretItems(t *testing.T) {
	c := mustParse(t, withItems(strings.Join([]string{
		item(`"limit_by_per_header":"Authorization"`, `"*"`),
		item(`"limit_by_header":"x-api-key"`, `"sk-premium-1"`),
		item(`"limit_by_per_header":"x-goog-api-key"`, `"*"`),
		item(`"limit_by_per_header":"x-team"`, `"*"`),
		item(`"limit_by_per_header":"x-my-key"`, `"*"`),
		item(`"limit_by_per_param":"key"`, `"*"`),
		item(`"limit_by_per_param":"user"`, `"*"`),
		item(`"limit_by_per_param":"sig"`, `"*"`),
		item(`"limit_by_per_cookie":"session"`, `"*"`),
		item(`"limit_by_per_consumer":""`, `"*"`),
		item(`"limit_by_per_ip":"from-remote-addr"`, `"*"`),
	}, ","), `"secret_headers":["X-My-Key"],"secret_params":["sig"],`))
	var secret []bool
	for _, it := range c.Items {
		secret = append(secret, it.Secret)
	}
	require.Equal(t, []bool{true, true, true, false, true, true, false, true, true, false, false}, secret)

	for _, tt := range []struct{ json, want string }{
		{withItems(item(`"limit_by_header":"h"`, `"k"`), `"secret_headers":["bad header"],`), `secret_headers[0]: invalid header name "bad header"`},
		{withItems(item(`"limit_by_header":"h"`, `"k"`), `"secret_headers":[],`), `secret_headers: must not be empty`},
		{withItems(item(`"limit_by_header":"h"`, `"k"`), `"secret_params":[""],`), `secret_params[0]: must not be empty`},
	} {
		_, err := ParseString(tt.json)
		require.ErrorContains(t, err, tt.want)
	}
}

// What logs and headers show of a match: a credential's fingerprint, a
// key that names one value fingerprinted, a pattern as configured.
func TestShownValueAndKey(t *testing.T) {
	c := mustParse(t, withItems(`{"limit_by_per_header":"x-api-key","limit_keys":[{"key":"regexp:^sk-premium-1$","token_per_minute":1},
		{"key":"regexp:^sk-","token_per_minute":1}]},
		{"limit_by_header":"authorization","limit_keys":[{"key":"Bearer sk-gold","token_per_minute":1}]},
		{"limit_by_per_header":"x-team","limit_keys":[{"key":"*","token_per_minute":1}]}`))
	ms := c.MatchAll(req("/", "", "x-api-key", "sk-premium-1", "authorization", "Bearer sk-gold", "x-team", "red"), nil)
	require.Len(t, ms, 3)
	require.Equal(t, Fingerprint("sk-premium-1"), ms[0].ShownValue())
	require.Equal(t, "regexp:"+Fingerprint("sk-premium-1"), ms[0].ShownKey(ms[0].Key))
	require.Equal(t, Fingerprint("Bearer sk-gold"), ms[1].ShownValue())
	require.Equal(t, Fingerprint("Bearer sk-gold"), ms[1].ShownKey(ms[1].Key))
	require.Equal(t, "red", ms[2].ShownValue())
	ms = c.MatchAll(req("/", "", "x-api-key", "sk-other"), nil)
	require.Equal(t, "regexp:^sk-", ms[0].ShownKey(ms[0].Key), "a pattern names no one")
}
