package estimate

// Opaque reasoning
//
// Reasoning models hand back their reasoning in forms the client cannot
// read and must send back with the history: Anthropic's thinking blocks
// carry a signature (and a redacted_thinking block its data), Gemini's parts
// a thoughtSignature, OpenAI's Responses reasoning items their
// encrypted_content. Providers bill what that stands for as input when it
// comes back (Anthropic keeps it for the last turns of a tool loop, and for
// every turn on its newest models), at about 0.06 to 0.2 tokens a character
// of base64 as observed; no provider documents a rate. The estimate counts
// it at the top of that range, a token for every opaqueBytesPerToken bytes:
// a reservation is an upper bound, and the reported usage corrects it. The
// readable parts (a thinking block's text, a reasoning item's summary) count
// as text.

// opaqueBytesPerToken is the rate of opaque reasoning: 0.2 tokens a byte.
const opaqueBytesPerToken = 5
