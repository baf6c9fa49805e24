package cachekey

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The values Redis's CLUSTER KEYSLOT gives for these keys.
func TestSlotMatchesRedisCluster(t *testing.T) {
	for key, want := range map[string]uint16{
		"123456789":            12739, // the CRC16/XMODEM check value 0x31C3 mod 16384
		"foo":                  12182,
		"{user1000}.following": 3443,
		"{user1000}.followers": 3443,
		"foo{}{bar}":           8363, // an empty tag: the whole key is hashed
		"foo{{bar}}zap":        4015, // the tag is "{bar"
		"foo{bar}{zap}":        5061, // only the first tag counts
	} {
		assert.Equal(t, want, Slot([]byte(key)), key)
	}
}

func TestEveryCounterOfASubjectSharesItsSlot(t *testing.T) {
	subject := AppendSubject(nil, "chat", "limit_by_header", "x-api-key", "sk-1")
	slot := Slot(subject)
	for _, suffix := range []string{":t1:1763726400", ":t60:29395440", ":t86400:20413"} {
		assert.Equal(t, slot, Slot(append(append([]byte{}, subject...), suffix...)))
	}
}

// Every slot has a tag of four characters from '@' to 'O' that hashes to
// it, found without a search.
func TestSlotTagOfEverySlot(t *testing.T) {
	for slot := range uint16(Slots) {
		tag := AppendSlotTag(nil, slot)
		if len(tag) != 4 || Slot([]byte("{"+string(tag)+"}")) != slot {
			t.Fatalf("slot %d: tag %q hashes to %d", slot, tag, Slot([]byte("{"+string(tag)+"}")))
		}
		for _, c := range tag {
			if c < '@' || c > 'O' {
				t.Fatalf("slot %d: tag %q", slot, tag)
			}
		}
	}
	assert.Equal(t, "atrl:unlisted:{"+string(AppendSlotTag(nil, 107))+"}:chat", string(Unlisted(107, "chat")))
}
