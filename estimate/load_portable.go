//go:build !(wasm || amd64 || arm64 || 386)

package estimate

// load8 returns the 8 bytes at s[i:i+8] (i+8 ≤ len(s)) as a little-endian
// word.
func load8(s string, i int) uint64 {
	b := s[i : i+8]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}
