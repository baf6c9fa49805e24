package requestbody

import (
	"testing"

	"github.com/tidwall/gjson"
)

// Every shape is a valid request of about the size asked for, so that a
// benchmark per KiB measures what it says.
func TestShapes(t *testing.T) {
	for name, build := range map[string]func(int) string{"conversation": Conversation, "short turns": ShortTurns, "dense": Dense, "agent": Agent} {
		for _, size := range []int{1 << 10, 16 << 10, 64 << 10} {
			if name == "agent" && size < 16<<10 {
				continue // its tool definitions alone are 9 KiB
			}
			body := build(size)
			if !gjson.Valid(body) {
				t.Fatalf("%s %d: not valid JSON", name, size)
			}
			if len(body) < size*85/100 || len(body) > size*115/100 {
				t.Errorf("%s %d: %d bytes", name, size, len(body))
			}
			if n := gjson.Get(body, "messages.#").Int(); n < 2 {
				t.Errorf("%s %d: %d messages", name, size, n)
			}
		}
	}
}
