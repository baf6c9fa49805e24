// Package scripts holds the limiter's Redis Lua scripts (the .lua files beside
// this one, embedded) and the Go that calls them: it encodes each call as one
// RESP command, sends it with EVALSHA (falling back to EVAL once when Redis
// answers NOSCRIPT, after a restart or a SCRIPT FLUSH), and decodes the reply.
package scripts

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strconv"
)

var (
	//go:embed admit.lua
	admitSource string
	//go:embed charge.lua
	chargeSource string
)

// Script is one Lua script and the SHA1 digest Redis caches it under.
type Script struct {
	Name   string
	Source string
	SHA1   string
}

var (
	// Admit checks every window of a subject and says whether a request may go.
	Admit = newScript("admit", admitSource)
	// Charge adds the tokens a response used to every window of a subject.
	Charge = newScript("charge", chargeSource)
)

func newScript(name, source string) *Script {
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:])}
}

// appendCall appends the head of one script call in RESP: the array header,
// EVALSHA and the digest (or EVAL and the source when bySource), the key count
// and the keys: one per subject, every counter of a subject being derived
// from its key. The caller appends exactly nargs arguments after it.
func (s *Script) appendCall(dst []byte, bySource bool, subjects []Subject, nargs int) []byte {
	dst = appendArrayHeader(dst, 3+len(subjects)+nargs)
	if bySource {
		dst = appendBulkString(dst, "EVAL")
		dst = appendBulkString(dst, s.Source)
	} else {
		dst = appendBulkString(dst, "EVALSHA")
		dst = appendBulkString(dst, s.SHA1)
	}
	dst = appendBulkInt(dst, int64(len(subjects)))
	for _, subject := range subjects {
		dst = appendBulk(dst, subject.Key)
	}
	return dst
}

func appendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

func appendBulk(dst []byte, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// appendBulkInt appends an integer as a bulk string, which is how script
// arguments travel.
func appendBulkInt(dst []byte, n int64) []byte {
	var digits [20]byte
	return appendBulk(dst, strconv.AppendInt(digits[:0], n, 10))
}
