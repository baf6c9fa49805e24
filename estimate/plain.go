package estimate

// The plain form of a turn
//
// Nearly every message of a request has the same plain shape: an object
// whose keys have no escapes and whose members are strings, but for the
// "content" (or "parts") that may be an array of parts, objects whose
// members are strings too, as in
//
//	{"role":"user","content":"Hello"}
//	{"role":"user","content":[{"type":"text","text":"Hello"}]}
//	{"role":"user","parts":[{"text":"Hello"}]}
//
// plainTurns reads runs of such elements of a turns array in one call, in
// WASM assembly (plain_wasm.s) where Go compiled to WASM spends about 100 ns
// on each JSON token. It counts what the walker would count for them: the
// decoded bytes of a string "content" or "parts", and of the "text" of each
// part. It leaves to the walker any element of another shape: a member that
// is a number, a literal, an object or an array (other than the parts), a
// key with an escape, a string with a control character or with a \u escape
// of a surrogate, a part with a "content" (which counts only in a
// tool_result), and anything that is not valid JSON.

// Little-endian words of the keys plainTurns looks for, compared 4 bytes at
// a time (overlapping for the odd lengths).
const (
	wordCont = 0x746e6f63 // "cont"
	wordTent = 0x746e6574 // "tent", the end of "content"
	wordPart = 0x74726170 // "part"
	wordArts = 0x73747261 // "arts", the end of "parts"
	wordText = 0x74786574 // "text"
)

// Where plainObject is: at a member of an object (at its start, where '}'
// may come, or after a comma), after a member's value, at an element of a
// message's parts (after '[' or a comma), after a part.
const (
	atMember = iota
	atObjectStart
	afterValue
	atPart
	afterPart
)
