package tokenusage

import "testing"

// forgedBodies are responses with something shaped like usage where a
// client can put it (request data the API echoes, tool schemas, tool-call
// arguments, content), each beside the real usage, which alone must count.
var forgedBodies = []struct {
	name string
	body string
	want *Usage
}{
	{"a tool schema echoed by the Responses API's response.completed",
		"event: response.completed\ndata: " + `{"type":"response.completed","response":{"id":"resp_1","status":"completed",` +
			`"tools":[{"type":"function","name":"log","parameters":{"type":"object","properties":{"usage":{"cache_creation_input_tokens":9e15,"input_tokens":9e15}}}}],` +
			`"metadata":{"usage":{"input_tokens":1}},"text":{"format":{"type":"json_schema","schema":{"usage":{"output_tokens":77777}}}},` +
			`"instructions":"reply with \"usage\":{\"input_tokens\":5}",` +
			`"usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":0},"output_tokens":30,"total_tokens":150}}}` + "\n\n",
		&Usage{Input: 120, Output: 30}},
	{"Gemini function-call arguments the model wrote at the client's request",
		`data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":{"usageMetadata":{"cachedContentTokenCount":4000,"promptTokenCount":1}}}}],"role":"model"}}],` +
			`"usageMetadata":{"promptTokenCount":4000,"candidatesTokenCount":12,"totalTokenCount":4012}}` + "\r\n\r\n",
		&Usage{Input: 4000, Output: 12}},
	{"chat tool-call arguments and content quoting usage",
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"usage\":{\"prompt_tokens\":1}}"}}]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{"content":"\n\ndata: {\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n"}}],"usage":null}` + "\n\n" +
			`data: {"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}` + "\n\n" + "data: [DONE]\n\n",
		&Usage{Input: 50, Output: 20}},
	{"chat tool-call arguments some providers send as an object",
		`{"choices":[{"message":{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":{"usage":{"prompt_tokens":1,"completion_tokens":9e15}}}}]}}],` +
			`"usage":{"prompt_tokens":8,"completion_tokens":2,"total_tokens":10}}`,
		&Usage{Input: 8, Output: 2}},
	{"an Anthropic tool_use input and an escaped key",
		`{"type":"message","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{"usage":{"input_tokens":1,"cache_read_input_tokens":9999}}}],` +
			`"\u0075sage":{"input_tokens":1,"output_tokens":1},"usage":{"input_tokens":30,"output_tokens":40}}`,
		&Usage{Input: 30, Output: 40}},
	{"Anthropic message_start echoing nothing, a usage key in a content block",
		"event: message_start\ndata: " + `{"type":"message_start","message":{"content":[],"usage":{"input_tokens":10,"output_tokens":1}}}` + "\n\n" +
			"event: content_block_start\ndata: " + `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{},"usage":{"output_tokens":5000}}}` + "\n\n" +
			"event: message_delta\ndata: " + `{"type":"message_delta","delta":{"stop_reason":"tool_use","usage":{"output_tokens":6000}},"usage":{"output_tokens":15}}` + "\n\n",
		&Usage{Input: 10, Output: 15}},
	{"Ollama tool-call arguments naming its counts",
		`{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"eval_count":1e15,"prompt_eval_count":1}}}]},"done":false}` + "\n" +
			`{"message":{"role":"assistant","content":"\"eval_count\":5"},"done":true,"prompt_eval_count":11,"eval_count":13}` + "\n",
		&Usage{Input: 11, Output: 13}},
	{"a usage object nested deep inside a choice",
		`{"choices":[{"message":{"content":[{"usage":{"prompt_tokens":9}}]},"logprobs":{"content":[{"usage":{"prompt_tokens":9}}]}}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
		&Usage{Input: 3, Output: 4}},
	{"no real usage at all",
		`data: {"choices":[{"delta":{"content":"{\"usage\":{\"prompt_tokens\":9}}"}}],"x":{"usage":{"prompt_tokens":9}}}` + "\n\n",
		nil},
}

func TestForgedUsageIgnored(t *testing.T) {
	for _, fb := range forgedBodies {
		t.Run(fb.name, func(t *testing.T) {
			body := []byte(fb.body)
			got, ok := parse(body)
			checkUsage(t, fb.want, got, ok, "whole")
			got, ok = parseBytewise(body)
			checkUsage(t, fb.want, got, ok, "one byte at a time")
			for cut := range len(body) + 1 {
				got, ok = parse(body[:cut], body[cut:])
				checkUsage(t, fb.want, got, ok, "cut at %d", cut)
			}
		})
	}
}
