// Package cachekey builds the Redis keys of the limiter's counters.
//
// A key names one limited subject and, after it, one window bucket:
//
//	atrl:{<rule>|<limit type>|<source>|<value>}:t60:29533012
//
// The part in braces is a Redis Cluster hash tag: every counter of one subject
// (all its windows and buckets) hashes to the same slot, so one script call can
// touch them all. Each of the four parts is written as is when it is short,
// printable ASCII and free of the characters that give the key its shape
// ('{', '}', '|') ; otherwise it is replaced by '#' and a hash of it, so that a
// client cannot grow keys without bound, inject separators or braces, or make
// two different subjects share a key (a part that itself starts with '#' is
// hashed too, so a raw part never looks like a hashed one).
package cachekey

import (
	"crypto/sha256"
	"encoding/hex"
)

const (
	// Prefix starts every key the limiter writes.
	Prefix = "atrl:"
	// MaxPartBytes is the longest part written as is; longer parts are hashed.
	MaxPartBytes = 64
	// hashedHexBytes is how many hex digits of SHA-256 a hashed part keeps
	// (128 bits: collisions are out of reach of any client).
	hashedHexBytes = 32
	// MaxSubjectBytes bounds a subject key: the prefix, braces, separators and
	// four parts, each at most MaxPartBytes long.
	MaxSubjectBytes = len(Prefix) + 2 + 3 + 4*MaxPartBytes
)

// AppendSubject appends the key of one limited subject to dst and returns the
// extended slice. rule is the rule name, limitType the rule item's type (e.g.
// "limit_by_header"), source what the value was read from (a header, param or
// cookie name; empty for the global threshold) and value the value that
// identifies the subject.
func AppendSubject(dst []byte, rule, limitType, source, value string) []byte {
	dst = append(dst, Prefix...)
	dst = append(dst, '{')
	dst = appendPart(dst, rule)
	dst = append(dst, '|')
	dst = appendPart(dst, limitType)
	dst = append(dst, '|')
	dst = appendPart(dst, source)
	dst = append(dst, '|')
	dst = appendPart(dst, value)
	return append(dst, '}')
}

// appendPart writes one part of a subject, hashed when it is not plain.
func appendPart(dst []byte, part string) []byte {
	if isPlain(part) {
		return append(dst, part...)
	}
	sum := sha256.Sum256([]byte(part))
	dst = append(dst, '#')
	var hexed [2 * sha256.Size]byte
	hex.Encode(hexed[:], sum[:])
	return append(dst, hexed[:hashedHexBytes]...)
}

// isPlain reports whether a part can be written into a key unchanged.
func isPlain(part string) bool {
	if len(part) > MaxPartBytes || (len(part) > 0 && part[0] == '#') {
		return false
	}
	for i := 0; i < len(part); i++ {
		c := part[i]
		if c < 0x20 || c > 0x7e || c == '{' || c == '}' || c == '|' {
			return false
		}
	}
	return true
}
