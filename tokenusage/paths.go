package tokenusage

import (
	"encoding/binary"
	"strings"
)

// Where each API puts what the Parser reads, as paths from a root: a whole
// JSON body, one SSE event's data, one NDJSON line, one element of a
// top-level array, or one AWS event-stream message's payload. Object keys
// are separated by '.', and "[]" stands for every element of an array. These
// tables are the only statement of the rules: the Parser's path tree is built
// from them, and the tests' reference parser walks decoded JSON with them.

// UsagePaths are where a usage object is accepted, and nowhere else: not in
// echoed request data, tool schemas, tool-call arguments or content.
var UsagePaths = []string{
	"usage",            // OpenAI chat chunk and body, Responses body, Anthropic message_delta and body, Cohere v2 body, Bedrock Converse
	"x_groq.usage",     // Groq's stream
	"choices.[].usage", // providers that report it in the choice (Moonshot)
	"response.usage",   // Responses API: response.completed, .incomplete, .failed
	"message.usage",    // Anthropic message_start
	"delta.usage",      // Cohere v2 message-end
	"usageMetadata",    // Gemini and Vertex AI
}

// countPaths are single numbers at the top level of a root: Ollama's native
// API reports usage that way in its last line.
var countPaths = map[string]field{
	"prompt_eval_count": ollamaPromptEvalCount,
	"eval_count":        ollamaEvalCount,
}

// TextPaths are the values that hold output the model wrote: strings are
// counted by their text's bytes, and an object or array with no path below
// it (tool-call arguments some APIs send as JSON) by its raw bytes. Echoes
// of the whole text (Responses' response.completed, *.done events) are left
// out so nothing is counted twice.
var TextPaths = []string{
	// OpenAI chat completions, stream and body; legacy completions.
	"choices.[].delta.content", "choices.[].delta.reasoning_content", "choices.[].delta.reasoning",
	"choices.[].delta.refusal", "choices.[].delta.tool_calls.[].function.arguments",
	"choices.[].message.content", "choices.[].message.reasoning_content", "choices.[].message.reasoning",
	"choices.[].message.refusal", "choices.[].message.tool_calls.[].function.arguments",
	"choices.[].text",
	// OpenAI Responses: the *.delta events' string, and the body's output.
	"delta",
	"output.[].content.[].text", "output.[].arguments", "output.[].summary.[].text",
	// Anthropic Messages: content_block_delta events, and the body.
	"delta.text", "delta.partial_json", "delta.thinking",
	"content.[].text", "content.[].thinking", "content.[].input",
	// Gemini and Vertex AI.
	"candidates.[].content.parts.[].text", "candidates.[].content.parts.[].functionCall.args",
	// Ollama native chat and generate.
	"message.content", "message.thinking", "message.tool_calls.[].function.arguments",
	"response", "thinking",
	// Cohere v2: content-delta and tool-call-delta events, and the body.
	"delta.message.content.text", "delta.message.tool_calls.function.arguments",
	"message.content.[].text", "message.tool_calls.[].function.arguments",
	// Bedrock ConverseStream contentBlockDelta, and the Converse body.
	"delta.toolUse.input", "delta.reasoningContent.text",
	"output.message.content.[].text", "output.message.content.[].toolUse.input",
	"output.message.content.[].reasoningContent.reasoningText.text",
}

// node is a position in the tree of paths. Node 0 is nowhere: a value there
// and everything inside it is skipped without looking at its keys.
type node uint8

const (
	nowhere node = 0
	root    node = 1
)

type pathNode struct {
	usage bool  // a usage object is accepted here
	text  bool  // output text
	count field // an Ollama count, or noField
	array node  // where the elements of an array here are, or nowhere
	keys  bool  // an object here has keys in the tree
}

// The tree: its nodes (an array, which a node indexes without a bounds
// check), the keys its paths name, each with an id, and the child of each
// node for each key id.
var (
	tree     [256]pathNode
	nodes    int // how many nodes tree has
	keyNames []string
	childOf  [256][maxKeys + 1]node // [node][key id + 1]; column 0 is for keys none of the tree's
)

// maxKeys bounds the number of keys the paths name.
const maxKeys = 63

// A key is found by its length and its first 8 bytes, in a hash table where
// no two keys of the tree share a slot: a single slot tells whether a key
// is one of them, without a loop and, for a key of at most 8 bytes, without
// comparing strings.
var (
	keySlots [256]keySlot
	keyMul   uint64 // the hash's multiplier, chosen at init so that no two keys share a slot
)

type keySlot struct {
	prefix uint64 // the key's keyPrefix
	size   uint8  // its length
	id     uint8  // its id + 1; 0 for a free slot
}

// keyPrefix returns the first 8 bytes of key as a little-endian number,
// zero above the end of a shorter key.
func keyPrefix(key []byte) uint64 {
	var b [8]byte
	copy(b[:], key)
	return binary.LittleEndian.Uint64(b[:])
}

// keyHash returns the slot in keySlots for a key of the given length and
// keyPrefix.
func keyHash(prefix uint64, size int) uint8 {
	return uint8((prefix ^ uint64(size)) * keyMul >> 56)
}

// keyColumn returns the column of key, whose keyPrefix is prefix, in
// childOf: its id + 1, or 0 when it is none of the tree's keys.
func keyColumn(key []byte, prefix uint64) uint8 {
	column := prefixColumn(prefix, len(key))
	if len(key) > 8 && column != 0 && keyNames[column-1][8:] != string(key[8:]) {
		column = 0
	}
	return column
}

// prefixColumn is keyColumn for a key known by its keyPrefix and its
// length alone, which for a key of at most 8 bytes is the key itself. It
// has no branch, for members: the column is the slot's when the slot's
// prefix and length are the key's (diff is 0), else 0.
func prefixColumn(prefix uint64, size int) uint8 {
	slot := &keySlots[keyHash(prefix, size)]
	diff := (slot.prefix ^ prefix) | (uint64(slot.size) ^ uint64(size))
	differ := (diff | -diff) >> 63 // 1 when diff is not 0
	return slot.id & uint8(differ-1)
}

// child returns the node below n for an object key.
func child(n node, key []byte) node {
	return childOf[n][keyColumn(key, keyPrefix(key))]
}

func init() {
	nodes = 2 // nowhere and root
	tree[nowhere].count, tree[root].count = noField, noField
	newNode := func() node {
		if nodes == len(tree) {
			panic("tokenusage: too many paths for a node index")
		}
		tree[nodes].count = noField
		nodes++
		return node(nodes - 1)
	}
	ids := map[string]int{}
	add := func(path string) node {
		n := root
		for _, key := range strings.Split(path, ".") {
			if key == "[]" {
				if tree[n].array == nowhere {
					tree[n].array = newNode()
				}
				n = tree[n].array
				continue
			}
			id, ok := ids[key]
			if !ok {
				if len(keyNames) == maxKeys {
					panic("tokenusage: too many keys")
				}
				if len(key) > maxKeyBytes {
					panic("tokenusage: a key longer than maxKeyBytes: " + key)
				}
				id = len(keyNames)
				ids[key] = id
				keyNames = append(keyNames, key)
			}
			if childOf[n][id+1] == nowhere {
				childOf[n][id+1] = newNode()
				tree[n].keys = true
			}
			n = childOf[n][id+1]
		}
		return n
	}
	for _, p := range UsagePaths {
		tree[add(p)].usage = true
	}
	for _, p := range TextPaths {
		tree[add(p)].text = true
	}
	for p, f := range countPaths {
		tree[add(p)].count = f
	}

	// The multiplier: the first odd number of a fixed sequence that gives
	// every key a slot of its own.
	for try := 0; ; try++ {
		if try == 1000 {
			panic("tokenusage: no multiplier gives every key a slot of its own")
		}
		keyMul = 0x9e3779b97f4a7c15 + uint64(try)*0x5851f42d4c957f2e
		keySlots = [len(keySlots)]keySlot{}
		free := true
		for id, key := range keyNames {
			prefix := keyPrefix([]byte(key))
			s := &keySlots[keyHash(prefix, len(key))]
			if s.id != 0 {
				free = false
				break
			}
			*s = keySlot{prefix: prefix, size: uint8(len(key)), id: uint8(id + 1)}
		}
		if free {
			break
		}
	}
}

// arrayChild returns the node of the elements of an array at n.
func arrayChild(n node) node { return tree[n].array }
