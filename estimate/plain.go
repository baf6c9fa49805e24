package estimate

// The plain form of a turn
//
// Nearly every message of a request has the same plain shape: an object
// whose keys have no escapes, whose "content" (or "parts") is a string or an
// array of text parts, whose tool calls and results count by their JSON,
// and whose other members, whatever they hold, do not count, as in
//
//	{"role":"user","content":"Hello"}
//	{"role":"user","content":[{"type":"text","text":"Hello"},{"type":"text","text":"World"}]}
//	{"role":"user","parts":[{"text":"Hello"}]}
//	{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{…}}]}
//	{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{…}}]}
//
// plainTurns reads runs of such elements of a turns array in one call, in
// WASM assembly (plain_wasm.s) where Go compiled to WASM spends about 100 ns
// on each JSON token. It counts what the walker would count for them: the
// decoded bytes of a string "content" or "parts", and of the string "text"
// of each part, and their calibrated count (count.go), which the assembly
// weighs as it scans them, each 8 bytes loaded once; and the tool calls
// and results in the history as the walker counts them (toolCall: a string
// as text, anything else by its JSON, which it notes for spansUnits); it
// skips the rest as skipValue does. It leaves to the walker any element of
// another shape: a key with an escape, counted text with a control
// character or a \u escape of a surrogate, a part with a "content" (which
// counts only in a tool_result), reasoning, an image by reference or inline
// data, a member nested deeper than the walker reads it (MaxDepth in the
// body), and anything that is not valid JSON.

// textSpans are strings of the body to weigh with the calibrated count
// (count.go) in one call of spansUnits: at[k] holds the start and the end of
// the content of a string (between its quotes), or of a JSON value (a tool
// call plainTurns notes), and bit k of escaped says whether it may have
// escapes; n spans are noted.
type textSpans struct {
	n       int64
	escaped uint64
	at      [maxTextSpans][2]int64
}

// maxTextSpans is how many strings spansUnits weighs in one call (a bit
// each in escaped).
const maxTextSpans = 64

// plainMessageDepth is the depth of a message in the body (the top-level
// object's is 1, its turns array's 2): a value plainTurns skips nests at
// most MaxDepth less the depth of the object or array it is in, as the
// walker's skip allows.
const plainMessageDepth = 3

// Little-endian words of the keys plainTurns looks for, compared 4 bytes at
// a time (overlapping for the odd lengths).
const (
	wordCont = 0x746e6f63 // "cont"
	wordTent = 0x746e6574 // "tent", the end of "content"
	wordPart = 0x74726170 // "part"
	wordArts = 0x73747261 // "arts", the end of "parts"
	wordText = 0x74786574 // "text"

	// The keys of tool calls and results, which count by their JSON (a
	// string as text): at a message, "tool_calls", "function_call",
	// "arguments", "output"; at a part, "input", "functionCall",
	// "functionResponse". Those longer than 8 bytes are compared 8 bytes
	// at a time (a key that counts is compared whole).
	wordOutp = 0x7074756f // "outp"
	wordTput = 0x74757074 // "tput", the end of "output"
	wordInpu = 0x75706e69 // "inpu"
	wordNput = 0x7475706e // "nput", the end of "input"

	word8ToolCal  = 0x6c61635f6c6f6f74 // "tool_cal"
	word8OlCalls  = 0x736c6c61635f6c6f // "ol_calls", the end of "tool_calls"
	word8Function = 0x6e6f6974636e7566 // "function"
	word8IonCall  = 0x6c6c61635f6e6f69 // "ion_call", the end of "function_call"
	word8TionCall = 0x6c6c61436e6f6974 // "tionCall", the end of "functionCall"
	word8Response = 0x65736e6f70736552 // "Response", the end of "functionResponse"
	word8Argument = 0x746e656d75677261 // "argument"
	word8Rguments = 0x73746e656d756772 // "rguments", the end of "arguments"

	// The keys of reasoning, which the walker counts: at a message,
	// "summary", "encrypted_content"; at a part, "thinking", "signature",
	// "data", "thoughtSignature", "thought_signature".
	wordSumm = 0x6d6d7573 // "summ"
	wordMary = 0x7972616d // "mary", the end of "summary"
	wordEncr = 0x72636e65 // "encr"
	wordThin = 0x6e696874 // "thin"
	wordKing = 0x676e696b // "king", the end of "thinking"
	wordSign = 0x6e676973 // "sign"
	wordTure = 0x65727574 // "ture", the end of "signature", "thoughtSignature", "thought_signature"
	wordData = 0x61746164 // "data"
	wordThou = 0x756f6874 // "thou"

	// The keys of images sent by reference, which the walker counts, at a
	// part: "image_url", "file_id", "source", "fileData", "file_data".
	wordImag = 0x67616d69 // "imag"
	wordUrlE = 0x6c72755f // "_url", the end of "image_url"
	wordFile = 0x656c6966 // "file"
	wordEId  = 0x64695f65 // "e_id", the end of "file_id"
	wordSour = 0x72756f73 // "sour"
	wordUrce = 0x65637275 // "urce", the end of "source"
	wordCapD = 0x61746144 // "Data", the end of "fileData"

	// The keys of inline data, which the walker counts as text when it is
	// no medium (media.go's inlineString), at a part: "file",
	// "input_audio", "inlineData", "inline_data", "image", "audio",
	// "video", "document".
	wordInli = 0x696c6e69 // "inli"
	wordMage = 0x6567616d // "mage", the end of "image"
	wordAudi = 0x69647561 // "audi"
	wordUdio = 0x6f696475 // "udio", the end of "audio", "input_audio"
	wordVide = 0x65646976 // "vide"
	wordIdeo = 0x6f656469 // "ideo", the end of "video"
	wordDocu = 0x75636f64 // "docu"
	wordMent = 0x746e656d // "ment", the end of "document"
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
