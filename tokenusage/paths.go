package tokenusage

import "strings"

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

// The tree: its nodes, the keys its paths name (each has an id, found
// through a small hash table), and the child of each node for each key.
var (
	tree     []pathNode
	keyNames []string
	keySlots [keySlotCount]uint8 // hash → key id + 1, or 0
	children [][]node            // [node][key id]
)

const keySlotCount = 256

// keySlot hashes a key to its slot in keySlots.
func keySlot(key []byte) int {
	if len(key) == 0 {
		return 0
	}
	return (len(key)*61 + int(key[0])*3 + int(key[len(key)-1])*7 + int(key[len(key)/2])) % keySlotCount
}

func init() {
	tree = []pathNode{{count: noField}, {count: noField}}
	add := func(path string) node {
		n := root
		for _, key := range strings.Split(path, ".") {
			if key == "[]" {
				if tree[n].array == nowhere {
					tree = append(tree, pathNode{count: noField})
					tree[n].array = node(len(tree) - 1)
				}
				n = tree[n].array
				continue
			}
			id := keyID(key)
			for len(children) < len(tree) {
				children = append(children, nil)
			}
			for len(children[n]) <= id {
				children[n] = append(children[n], nowhere)
			}
			if children[n][id] == nowhere {
				tree = append(tree, pathNode{count: noField})
				children[n][id] = node(len(tree) - 1)
				tree[n].keys = true
			}
			n = children[n][id]
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
	for len(children) < len(tree) {
		children = append(children, nil)
	}
	for n := range children { // every row as long as the key list
		for len(children[n]) < len(keyNames) {
			children[n] = append(children[n], nowhere)
		}
	}
	if len(tree) > 255 || len(keyNames) > 254 {
		panic("tokenusage: too many paths for a node index")
	}
}

// keyID returns the id of a key named in the tree, adding it at init. Keys
// sharing a slot take the next free one (open addressing).
func keyID(key string) int {
	slot := keySlot([]byte(key))
	for ; keySlots[slot] != 0; slot = (slot + 1) % keySlotCount {
		if id := keySlots[slot]; keyNames[id-1] == key {
			return int(id - 1)
		}
	}
	keyNames = append(keyNames, key)
	keySlots[slot] = uint8(len(keyNames))
	return len(keyNames) - 1
}

// child returns the node below n for an object key.
func child(n node, key []byte) node {
	for slot := keySlot(key); keySlots[slot] != 0; slot = (slot + 1) % keySlotCount {
		if id := keySlots[slot]; keyNames[id-1] == string(key) {
			return children[n][id-1]
		}
	}
	return nowhere
}

// arrayChild returns the node of the elements of an array at n.
func arrayChild(n node) node { return tree[n].array }

// hasChildren tells whether an object at n is entered rather than skipped
// (or counted whole).
func hasChildren(n node) bool { return tree[n].keys }
