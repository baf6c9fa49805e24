package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdkChunk is what the test reads of a chunk the OpenAI SDK handed over.
type sdkChunk struct {
	Object  string `json:"object"`
	Choices []struct {
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage  json.RawMessage `json:"usage"`
	Done   bool            `json:"done"`
	Chunks int             `json:"chunks"`
}

// runSDK runs tools/e2e/sdk/chat_stream.mjs (the official openai-node SDK,
// pinned in package-lock.json and installed by make sdks) against the
// stack's gateway, with env, and returns the chunks it printed.
func (s *stack) runSDK(env ...string) []sdkChunk {
	s.t.Helper()
	stdout := s.runNode("chat_stream.mjs", append(env, "OPENAI_BASE_URL="+s.url+"/v1")...)
	var chunks []sdkChunk
	for _, line := range strings.Split(strings.TrimSpace(string(stdout)), "\n") {
		var c sdkChunk
		require.NoError(s.t, json.Unmarshal([]byte(line), &c), line)
		chunks = append(chunks, c)
	}
	require.NotEmpty(s.t, chunks)
	require.True(s.t, chunks[len(chunks)-1].Done, "the client did not finish:\n%s", stdout)
	return chunks[:len(chunks)-1]
}

// sdkModules are the official SDKs tools/e2e/sdk pins (make sdks installs
// them).
var sdkModules = []string{"openai", "@anthropic-ai/sdk", "@google/genai"}

// runNode runs a script of tools/e2e/sdk with node, with env added to the
// environment, for at most 60 s, and returns what it printed; the test
// fails when it fails.
func (s *stack) runNode(script string, env ...string) []byte {
	s.t.Helper()
	node, err := exec.LookPath("node")
	require.NoError(s.t, err, "node is missing: make sdks installs it")
	dir, err := filepath.Abs("sdk")
	require.NoError(s.t, err)
	for _, m := range sdkModules {
		_, err = os.Stat(filepath.Join(dir, "node_modules", m))
		require.NoError(s.t, err, "the %s SDK is not installed: make sdks installs it", m)
	}
	cmd := exec.Command(node, script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	require.NoError(s.t, cmd.Start())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		s.t.Fatalf("%s did not finish in 60 s\nstderr:\n%s", script, stderr.String())
	}
	require.NoError(s.t, err, "%s failed:\n%s", script, stderr.String())
	return stdout.Bytes()
}

// TestOpenAISDKStream is the most common call there is: the official
// OpenAI SDK, stream: true, no stream_options. The plugin asks the upstream
// for the usage and charges it exactly, and the SDK sees no usage chunk;
// a client that leaves before the usage is charged an estimate.
func TestOpenAISDKStream(t *testing.T) {
	s := startStack(t, testConfig("deny", 1000))
	s.avoidDayEdge()

	t.Run("charged exactly, the client's chunks unchanged", func(t *testing.T) {
		chunks := s.runSDK("KEY=big-sdk-1", "MOCK_USAGE=311,97,100", "MOCK_EVENTS=6")
		s.waitIdle()
		assert.Equal(t, int64(311+97), s.counter("big-sdk-1"), "the stream's own usage, exactly")

		// What the SDK handed over: the six content chunks and the one
		// that finishes, as without the plugin; no chunk with a usage.
		require.Len(t, chunks, 7)
		var text strings.Builder
		for i, c := range chunks {
			assert.Equal(t, "chat.completion.chunk", c.Object)
			require.Len(t, c.Choices, 1, "chunk %d", i)
			text.WriteString(c.Choices[0].Delta.Content)
			assert.Contains(t, []string{"", "null"}, string(c.Usage), "chunk %d carries a usage", i)
		}
		assert.Equal(t, "tok0 tok1 tok2 tok3 tok4 tok5 ", text.String())
		require.NotNil(t, chunks[6].Choices[0].FinishReason)
		assert.Equal(t, "stop", *chunks[6].Choices[0].FinishReason)
		// (The mock sends the usage only when asked: the upstream was asked.)
	})

	t.Run("a client that leaves before the usage pays an estimate", func(t *testing.T) {
		chunks := s.runSDK("KEY=big-sdk-2", "MOCK_USAGE=311,97,100", "MOCK_EVENTS=40",
			"MOCK_DELAY_MS=30", "STOP_AFTER=3")
		require.Len(t, chunks, 3)
		s.waitIdle()
		// The estimate: the prompt, estimated from the request body, plus
		// the text that went through over 4 bytes per token: at least the
		// three chunks the client read ("tok0 tok1 tok2 ", 15 bytes), at
		// most the forty words of the whole stream (210 bytes). The SDK's
		// request body is under 200 bytes: its prompt under 50 tokens.
		got := s.counter("big-sdk-2")
		t.Logf("charged %d by estimate", got)
		assert.GreaterOrEqual(t, got, int64(1+(15+3)/4), "the estimate counts the prompt and the text received")
		assert.LessOrEqual(t, got, int64(50+(210+3)/4))
		assert.Less(t, got, int64(311+97), "the usage never came")
	})
}
