package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Hand-written response bodies, one per provider shape.
const (
	// OpenAI chat completions, streamed with stream_options.include_usage:
	// the usage comes in a last chunk without choices.
	openAIStream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{"content":"Hello there"},"finish_reason":null}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":20,"completion_tokens":7,"total_tokens":27,"prompt_tokens_details":{"cached_tokens":8}}}

data: [DONE]

`
	// Anthropic Messages, streamed: the model is in message_start's message,
	// the input and cache counts there too, the output in message_delta.
	anthropicStream = "event: message_start\r\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],"usage":{"input_tokens":12,"cache_creation_input_tokens":100,"cache_read_input_tokens":50,"output_tokens":1}}}` + "\r\n\r\n" +
		"event: content_block_delta\r\n" +
		`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}` + "\r\n\r\n" +
		"event: message_delta\r\n" +
		`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":30}}` + "\r\n\r\n" +
		"event: message_stop\r\n" +
		`data: {"type":"message_stop"}` + "\r\n\r\n"
	// Gemini generateContent, a JSON body naming no model (only its version).
	geminiJSON = `{
  "candidates": [{"content": {"parts": [{"text": "Hello"}], "role": "model"}, "finishReason": "STOP"}],
  "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 10, "thoughtsTokenCount": 5, "cachedContentTokenCount": 16, "totalTokenCount": 55},
  "modelVersion": "gemini-2.5-flash"
}
`
	// An OpenAI chat stream whose request did not ask for the usage.
	noUsageStream = `data: {"id":"chatcmpl-2","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"Hello, world! This is the output."},"finish_reason":null}]}

data: {"id":"chatcmpl-2","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
)

// Their usage, as the command prints it.
const (
	openAIUsage    = `{"input":20,"output":7,"cache_read":8,"cache_creation":0,"total":27}`
	anthropicUsage = `{"input":162,"output":30,"cache_read":50,"cache_creation":100,"total":192}`
	geminiUsage    = `{"input":40,"output":15,"cache_read":16,"cache_creation":0,"total":55}`
)

// weightedYAML prices tokens as the README's weighted example does, with
// an override for the Anthropic body's model, and 3 bytes per token.
const weightedYAML = `rule_name: billed
global_threshold:
  token_per_day: 50000000
token_count_strategy: weighted
token_weights:
  input: 1
  output: 4
  cache_read: 0.1
  cache_creation: 1.25
  models:
    claude-sonnet-4-20250514:
      input: 3
      output: 15
token_reservation:
  bytes_per_token: 3
redis:
  service_name: redis.static
`

// fixtures writes the bodies into a temporary directory and returns their
// paths, and the path of a file that does not exist.
func fixtures(t *testing.T) (openAI, anthropic, gemini, noUsage, missing string) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(body), 0o644))
		return path
	}
	return write("openai.sse", openAIStream), write("anthropic.sse", anthropicStream),
		write("gemini.json", geminiJSON), write("nousage.sse", noUsageStream),
		filepath.Join(dir, "missing.sse")
}

// writeFile writes a file into a temporary directory and returns its path.
func writeFile(t *testing.T, name, content string) string {
	path := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// atrl runs the command with stdin and returns its exit status, stdout and
// stderr.
func atrl(stdin string, args ...string) (status int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	status = run(args, strings.NewReader(stdin), &out, &errOut)
	return status, out.String(), errOut.String()
}

func usageLineOf(file, usage string, cost int64) string {
	return fmt.Sprintf(`{"file":%q,"usage":%s,"cost":%d}`, file, usage, cost)
}

// estimatedLine is the line of noUsageStream: its output text, "Hello,
// world! This is the output.", is 33 bytes.
func estimatedLine(file string, cost int64) string {
	return fmt.Sprintf(`{"file":%q,"usage":null,"estimated":true,"text_bytes":33,"cost":%d}`, file, cost)
}

func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestUsageDefaultCost(t *testing.T) {
	openAI, anthropic, gemini, noUsage, missing := fixtures(t)
	_, missingErr := os.Open(missing)
	require.Error(t, missingErr)

	status, out, errOut := atrl("", "usage", openAI, missing, anthropic, gemini, noUsage)
	assert.Equal(t, exitFailed, status, "a file could not be read")
	assert.Empty(t, errOut)
	assert.Equal(t, lines(
		usageLineOf(openAI, openAIUsage, 27),
		fmt.Sprintf(`{"file":%q,"error":%q}`, missing, missingErr.Error()),
		usageLineOf(anthropic, anthropicUsage, 192),
		usageLineOf(gemini, geminiUsage, 55),
		estimatedLine(noUsage, 9), // 33 bytes / 4 per token, rounded up
	), out)
}

func TestUsageAllReadExitsZero(t *testing.T) {
	openAI, anthropic, _, _, _ := fixtures(t)
	status, out, _ := atrl("", "usage", anthropic, openAI)
	assert.Equal(t, exitOK, status)
	assert.Equal(t, lines(usageLineOf(anthropic, anthropicUsage, 192), usageLineOf(openAI, openAIUsage, 27)), out)
}

func TestUsageWeightedCost(t *testing.T) {
	openAI, anthropic, gemini, noUsage, _ := fixtures(t)
	cfg := writeFile(t, "plugin.yaml", weightedYAML)

	status, out, errOut := atrl("", "usage", "-config", cfg, openAI, anthropic, gemini, noUsage)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(
		// gpt-4o-2024-08-06 has no weights of its own: uncached 12×1 +
		// output 7×4 + cache reads 8×0.1 = 40.8, rounded up.
		usageLineOf(openAI, openAIUsage, 41),
		// claude-sonnet-4-20250514 (from message_start): 12×3 + 30×15 +
		// 50×0.1 + 100×1.25 (cache weights inherited) = 616.
		usageLineOf(anthropic, anthropicUsage, 616),
		// No model: 24×1 + 15×4 + 16×0.1 = 85.6.
		usageLineOf(gemini, geminiUsage, 86),
		estimatedLine(noUsage, 44), // 33 bytes / 3 per token = 11 output tokens, ×4
	), out)

	// -model prices a body as that model, whatever the body names: the
	// Anthropic body at the default weights, 12 + 30×4 + 5 + 125 = 262, the
	// OpenAI body at the Anthropic model's.
	status, out, errOut = atrl("", "usage", "-config", cfg, "-model", "other", anthropic)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(usageLineOf(anthropic, anthropicUsage, 262)), out)
	status, out, errOut = atrl("", "usage", "-config", cfg, "-model", "claude-sonnet-4-20250514", openAI)
	assert.Equal(t, exitOK, status, errOut)
	// 12×3 + 7×15 + 8×0.1 = 141.8.
	assert.Equal(t, lines(usageLineOf(openAI, openAIUsage, 142)), out)
}

func TestUsageJSONConfig(t *testing.T) {
	openAI, anthropic, _, _, _ := fixtures(t)
	cfg := writeFile(t, "plugin.json", `{"rule_name":"out","global_threshold":{"token_per_minute":10},
		"token_count_strategy":"output_tokens","redis":{"service_name":"redis.static"}}`)
	status, out, errOut := atrl("", "usage", "-config", cfg, openAI, anthropic)
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(usageLineOf(openAI, openAIUsage, 7), usageLineOf(anthropic, anthropicUsage, 30)), out)
}

func TestUsageStdin(t *testing.T) {
	status, out, errOut := atrl(geminiJSON, "usage", "-")
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, lines(usageLineOf("-", geminiUsage, 55)), out)
}

// Bodies are fed to the parser in chunks: a usage object cut between two
// is still read.
func TestUsageAcrossChunks(t *testing.T) {
	usage := `data: {"choices":[],"usage":{"prompt_tokens":1234,"completion_tokens":56}}` + "\n\n"
	cut := strings.Index(usage, "34,") // the first chunk ends in "prompt_tokens":12
	head, tail := `data: {"choices":[{"delta":{"content":"`, `"}}]}`+"\n\n"
	body := head + strings.Repeat("x", chunkBytes-cut-len(head)-len(tail)) + tail + usage
	require.Equal(t, `"prompt_tokens":12`, body[chunkBytes-len(`"prompt_tokens":12`):chunkBytes])
	status, out, _ := atrl(body, "usage", "-")
	assert.Equal(t, exitOK, status)
	assert.Equal(t, lines(usageLineOf("-", `{"input":1234,"output":56,"cache_read":0,"cache_creation":0,"total":1290}`, 1290)), out)
}

func TestUsageRefusesLargeFiles(t *testing.T) {
	// A sparse file: refused by its size, unread.
	path := filepath.Join(t.TempDir(), "large.sse")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(maxBodyBytes+1))
	require.NoError(t, f.Close())
	status, out, _ := atrl("", "usage", path)
	assert.Equal(t, exitFailed, status)
	assert.Equal(t, lines(fmt.Sprintf(`{"file":%q,"error":"larger than 64 MiB: refused (no response body the plugin reads is that large)"}`, path)), out)

	// A stream: refused once it is read past the limit.
	var stdout, stderr bytes.Buffer
	status = run([]string{"usage", "-"}, io.LimitReader(zeros{}, maxBodyBytes+1), &stdout, &stderr)
	assert.Equal(t, exitFailed, status)
	assert.Contains(t, stdout.String(), `"error":"larger than 64 MiB`)

	// Exactly the limit is read.
	status, out, _ = atrl(strings.Repeat(" ", maxBodyBytes), "usage", "-")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, out, `"usage":null`)
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func TestUsageBadInvocations(t *testing.T) {
	openAI, _, _, _, missing := fixtures(t)
	badConfig := writeFile(t, "bad.yaml", "rule_name: x\nglobal_threshold:\n  token_per_minuet: 1\nredis:\n  service_name: redis.static\n")
	for _, tc := range []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no files", []string{"usage"}, "atrl usage: no files"},
		{"unknown flag", []string{"usage", "-cost", "x", openAI}, "flag provided but not defined: -cost"},
		{"missing config", []string{"usage", "-config", missing, openAI}, "atrl usage: -config: " + missing + ": cannot be read: no such file or directory\n"},
		{"invalid config", []string{"usage", "-config", badConfig, openAI}, "global_threshold.token_per_minuet: unknown field (did you mean token_per_minute?)"},
		{"not YAML", []string{"usage", "-config", writeFile(t, "c.yaml", "a: [1"), openAI}, "c.yaml: invalid YAML at line 1, column 4: "},
		{"several configurations", []string{"usage", "-config", "../../tools/deploy/wasmplugin.yaml", openAI}, "atrl usage: ../../tools/deploy/wasmplugin.yaml holds 2 configurations " +
			`(defaultConfig: rule "consumers"; matchRules[0] (ingress default/llm-chat): rule "llm-chat"): choose one with -rule NAME`},
		{"rule without config", []string{"usage", "-rule", "chat", openAI}, "atrl usage: -rule chooses a configuration of -config, which is not given"},
		{"no such rule", []string{"usage", "-config", "../../tools/deploy/wasmplugin.yaml", "-rule", "chat", openAI}, "atrl usage: -rule chat: no configuration of " +
			`../../tools/deploy/wasmplugin.yaml has that rule_name or name (defaultConfig: rule "consumers"; matchRules[0] (ingress default/llm-chat): rule "llm-chat")`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out, errOut := atrl("", tc.args...)
			assert.Equal(t, exitBadArgs, status)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.stderr)
		})
	}
}

func TestDispatch(t *testing.T) {
	status, out, errOut := atrl("")
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "atrl <command> [arguments]")
	assert.Contains(t, errOut, "\tusage    print the usage")

	status, out, _ = atrl("", "help")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, out, "atrl <command> [arguments]")

	status, out, _ = atrl("", "help", "usage")
	assert.Equal(t, exitOK, status)
	assert.True(t, strings.HasPrefix(out, "usage: atrl usage [-config FILE [-rule NAME]] [-model NAME] FILE..."), out)

	status, _, errOut = atrl("", "usage", "-h")
	assert.Equal(t, exitOK, status)
	assert.Contains(t, errOut, "usage: atrl usage")

	status, out, errOut = atrl("", "quota")
	assert.Equal(t, exitBadArgs, status)
	assert.Empty(t, out)
	assert.Equal(t, "atrl: unknown command \"quota\"; run 'atrl help' for the commands\n", errOut)

	status, _, errOut = atrl("", "help", "quota")
	assert.Equal(t, exitBadArgs, status)
	assert.Contains(t, errOut, `unknown command "quota"`)
}

// Without -config, the cost is what a configuration that sets none of the
// cost fields computes: total_tokens, output text at 4 bytes per token.
func TestDefaultConfig(t *testing.T) {
	c := defaultConfig()
	assert.Equal(t, config.CountTotal, c.Cost.Strategy)
	assert.Equal(t, int64(0), c.Reservation.BytesPerToken) // the calibrated count
	assert.Equal(t, int64(4), c.Reservation.SizeBytesPerToken())
}

func TestBodyModel(t *testing.T) {
	for body, want := range map[string]string{
		openAIStream:    "gpt-4o-2024-08-06",
		anthropicStream: "claude-sonnet-4-20250514",
		geminiJSON:      "",
		`{"id":"chatcmpl-3","model":"gpt-4o-mini","usage":{"prompt_tokens":1}}`:                                 "gpt-4o-mini",
		` {"usage":{"prompt_tokens":1},"nested":{"model":"not-top-level"}}`:                                     "",
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"model\":\"gpt-5\"}}\n\n": "gpt-5",
		"data: [DONE]\n\ndata: {\"model\":\"\"}\n\ndata: {\"model\":\"late\"}\n":                                "late",
		"": "",
	} {
		assert.Equal(t, want, bodyModel([]byte(body)), "%.60q", body)
	}
}

// The sample line of docs/metrics.md is what the command prints for a body
// reporting that usage, under the weighted example of docs/budgets.md.
func TestReadmeSample(t *testing.T) {
	metrics, err := os.ReadFile("../../docs/metrics.md")
	require.NoError(t, err)
	sample := regexp.MustCompile("(?m)^go run ./cmd/atrl usage -config plugin.yaml response.sse\n(.*)$").FindSubmatch(metrics)
	require.NotNil(t, sample, "docs/metrics.md lost its atrl sample")
	budgets, err := os.ReadFile("../../docs/budgets.md")
	require.NoError(t, err)
	weighted := regexp.MustCompile("(?ms)^#+ Weighted cost\n.*?```yaml\n(.*?)```").FindSubmatch(budgets)
	require.NotNil(t, weighted, "docs/budgets.md lost its weighted example")
	u := gjson.GetBytes(sample[1], "usage")
	require.True(t, u.Get("input").Int() > 0, "%s", sample[1])

	t.Chdir(t.TempDir())
	require.NoError(t, os.WriteFile("plugin.yaml", weighted[1], 0o644))
	body := fmt.Sprintf(`data: {"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":%d}}}`+"\n\ndata: [DONE]\n\n",
		u.Get("input").Int(), u.Get("output").Int(), u.Get("cache_read").Int())
	require.NoError(t, os.WriteFile("response.sse", []byte(body), 0o644))
	status, out, errOut := atrl("", "usage", "-config", "plugin.yaml", "response.sse")
	assert.Equal(t, exitOK, status, errOut)
	assert.Equal(t, string(sample[1])+"\n", out)
}
