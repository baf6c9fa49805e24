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
//
// A per-model limit (per_model in the configuration) counts one model's
// requests within a subject: its key is the subject's, then ":m:" and the
// model, outside the braces so that it stays in the subject's slot:
//
//	atrl:{<rule>|<limit type>|<source>|<value>}:m:<model>:t60:29533012
//
// The model is written as is when it is plain, as the parts are, and free
// of ':'; otherwise it is hashed likewise. What the scripts append to a
// subject starts with ':' (":t60:", ":q60:", ":c", ":x:", ":a:"), never with
// ":m:", so neither a subject's own keys and its models' nor two models'
// keys can be the same.
package cachekey

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
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
	// ModelSeparator comes between a subject and its model (AppendModel).
	ModelSeparator = ":m:"
	// MaxModelSubjectBytes bounds a subject key with its model.
	MaxModelSubjectBytes = MaxSubjectBytes + len(ModelSeparator) + MaxPartBytes
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

// AlertRegistry is the key of a rule's alert registry (a hash, see
// scripts/alertbox.lua): the owners (config.AlertOwner) of its budget
// alerts, and when each last looked for them. Its hash tag is the rule's
// part of the subjects' keys, as alerts.lua reads it; beside it, in its
// slot, each owner's alert index (AlertIndex).
func AlertRegistry(rule string) []byte { return append(alertBase(rule), ":c"...) }

// AlertIndex is the key of the alert index of one owner of a rule's budget
// alerts: the outboxes of its subjects that hold that owner's alerts.
func AlertIndex(rule, owner string) []byte {
	return append(append(alertBase(rule), ':'), owner...)
}

// alertBase is what the keys of a rule's alert registry and indexes start
// with: "atrl:alerts:{<rule>}".
func alertBase(rule string) []byte {
	return append(appendPart([]byte(Prefix+"alerts:{"), rule), '}')
}

// OutboxSuffix, then the alerts' owner (config.AlertOwner), follows a
// subject's key in the key of an outbox, where the budget alerts of that
// subject and owner wait to be delivered.
const OutboxSuffix = ":!o:"

// Unlisted is the key, in a slot, of the outboxes of a rule's subjects in
// that slot that got an alert the call could not list in its index (on a
// Redis Cluster the index is in another slot): a sorted set, by when, that
// the rule's sweep goes through slot by slot (see scripts/alertbox.lua).
func Unlisted(slot uint16, rule string) []byte {
	k := AppendSlotTag([]byte(Prefix+"unlisted:{"), slot)
	return appendPart(append(k, "}:"...), rule)
}

// Parts reads back the four parts of a key AppendSubject wrote (a
// subject's key, or one of its keys: tail is what follows the braces, such
// as ":t60:29533012"); ok is false for a key that is not the limiter's. A
// part is as the key holds it: hashed ('#' and hex) when it was written so.
func Parts(key string) (parts [4]string, tail string, ok bool) {
	rest, ok := strings.CutPrefix(key, Prefix+"{")
	end := strings.IndexByte(rest, '}') // plain parts never hold a '}', and hashed ones are hex
	if !ok || end < 0 {
		return parts, "", false
	}
	inside := rest[:end]
	for i := range 3 {
		j := strings.IndexByte(inside, '|')
		if j < 0 {
			return parts, "", false
		}
		parts[i], inside = inside[:j], inside[j+1:]
	}
	if strings.IndexByte(inside, '|') >= 0 {
		return parts, "", false
	}
	parts[3] = inside
	return parts, rest[end+1:], true
}

// AppendModel appends to a subject key, as AppendSubject builds it, the
// suffix that narrows it to one model: ":m:" and the model, hashed unless
// it is plain and free of ':'. The key keeps the subject's hash tag, so its
// Redis Cluster slot.
func AppendModel(dst []byte, model string) []byte {
	dst = append(dst, ModelSeparator...)
	if strings.IndexByte(model, ':') >= 0 {
		return appendHashed(dst, model)
	}
	return appendPart(dst, model)
}

// appendPart writes one part of a subject, hashed when it is not plain.
func appendPart(dst []byte, part string) []byte {
	if isPlain(part) {
		return append(dst, part...)
	}
	return appendHashed(dst, part)
}

// appendHashed writes '#' and the hash of a part.
func appendHashed(dst []byte, part string) []byte {
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
