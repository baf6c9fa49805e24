package config

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
)

// Values read from a credential (an API key in a header, a session cookie,
// a key in the query) name subjects, and would reach every log line,
// webhook body, header and error message that names a subject. Such a
// value is shown as a fingerprint (see Fingerprint) everywhere but in the
// answer to the client's own quota request; Redis keys keep it as the
// cachekey package writes it.

// credentialHeaders are the headers that carry credentials, whatever the
// configuration says: the standard ones and each official SDK's.
var credentialHeaders = []string{"authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key"}

// credentialParams are the query parameters that carry credentials:
// Gemini's key, and the usual names of a key or token in a URL.
var credentialParams = []string{"key", "api_key", "apikey", "api-key", "access_token", "token"}

// readSecretHeaders reads secret_headers: more headers whose values are
// credentials.
func readSecretHeaders(c *Config, path string, v gjson.Result) (err error) {
	c.SecretHeaders, err = readNonEmptyArray(path, v, func(path string, v gjson.Result) (string, error) {
		s, err := readNonEmptyString(path, v)
		if err == nil && !validHeaderName(s) {
			err = fieldErr(path, "invalid header name ", quote(s))
		}
		return strings.ToLower(s), err
	})
	return err
}

// readSecretParams reads secret_params: more query parameters whose values
// are credentials.
func readSecretParams(c *Config, path string, v gjson.Result) (err error) {
	c.SecretParams, err = readNonEmptyArray(path, v, readNonEmptyString)
	return err
}

// markSecretItems sets each rule item's Secret: whether the value it reads
// is a credential.
func (c *Config) markSecretItems() {
	for i := range c.Items {
		it := &c.Items[i]
		it.Secret = c.secretSource(it.Type, it.Name)
	}
}

// secretSource reports whether the values a rule item of a type reads from
// source (a header, parameter or cookie name) are credentials: decided by
// the type, the source and secret_headers and secret_params alone.
func (c *Config) secretSource(t LimitType, source string) bool {
	switch t {
	case ByHeader, ByPerHeader:
		return slices.Contains(credentialHeaders, source) || slices.Contains(c.SecretHeaders, source)
	case ByConsumer, ByPerConsumer: // a consumer's name, which the auth plugin sets
		return slices.Contains(c.SecretHeaders, source)
	case ByParam, ByPerParam:
		return slices.Contains(credentialParams, strings.ToLower(source)) || slices.Contains(c.SecretParams, source)
	case ByCookie, ByPerCookie, ByAPIKey, ByPerAPIKey: // a cookie is a session's, or a token
		return true
	}
	return false
}

// ReadsSecret reports whether the subjects of a rule item type (its name,
// "limit_by_header") reading source are named by a credential, as the
// parts of their keys say (see cachekey.Parts). It does not depend on the
// configuration's rule items, only on secret_headers and secret_params
// (see AlertOwner): a subject of another configuration's item is read as
// that configuration reads it.
func (c *Config) ReadsSecret(limitType, source string) bool {
	for t := range limitTypes {
		if limitTypes[t].field == limitType {
			return c.secretSource(LimitType(t), source)
		}
	}
	return false
}

// Fingerprint shows a credential without giving it away: at most its
// first four bytes (a quarter of it at most; a scheme such as "Bearer "
// kept in front), "...", and 8 hex digits of its SHA-256:
// "sk-p...#9f86d081", "Bearer sk-p...#1c2a0b33". The same value always
// gets the same fingerprint, so that log lines, alerts and headers about
// one subject can be matched, and against the value an operator knows.
func Fingerprint(v string) string {
	var b [32]byte // the longest: "Negotiate ", 4 bytes, "...#", 8 hex digits
	return string(AppendFingerprint(b[:0], v))
}

// AppendFingerprint appends the fingerprint of v (see Fingerprint) to b.
func AppendFingerprint(b []byte, v string) []byte {
	scheme := ""
	for _, s := range registeredSchemes { // "Bearer <credentials>", as canonicalCredentials spells it
		if len(v) > len(s) && v[len(s)] == ' ' && v[:len(s)] == s {
			scheme = v[:len(s)+1]
		}
	}
	secret := v[len(scheme):]
	n := min(4, len(secret)/4)
	for j := 0; j < n; j++ { // shown bytes are printable ASCII, or none are
		if secret[j] < 0x21 || secret[j] > 0x7e {
			n = 0
		}
	}
	sum := sha256.Sum256([]byte(v))
	b = append(b, scheme...)
	b = append(b, secret[:n]...)
	b = append(b, "...#"...)
	return hex.AppendEncode(b, sum[:4])
}

// Secret reports whether the match's value is read from a credential.
func (m *Match) Secret() bool { return m.Item != nil && m.Item.Secret }

// ShownValue is the match's value as logs, alerts and headers show it: a
// fingerprint when it is read from a credential.
func (m *Match) ShownValue() string {
	if m.Secret() && m.Value != "" {
		return Fingerprint(m.Value)
	}
	return m.Value
}

// ShownKey is a limit key of the match's item as logs, alerts and headers
// show it: for an item that reads a credential, a key that names one
// value (an exact key, or a regexp that is that value, "regexp:^sk-1$")
// is a credential too, and is fingerprinted; patterns ("*",
// "regexp:^sk-free-") are shown as configured.
func (m *Match) ShownKey(k *LimitKey) string {
	if !m.Secret() {
		return k.Key
	}
	switch {
	case k.Kind == KeyExact:
		return Fingerprint(k.Key)
	case k.Kind == KeyRegexp && k.form == literalWhole:
		return RegexpKeyPrefix + Fingerprint(k.literal)
	}
	return k.Key
}
