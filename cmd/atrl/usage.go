package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

const (
	// maxBodyBytes bounds the size of a response body atrl usage reads.
	maxBodyBytes = 64 << 20
	// chunkBytes is the size of the pieces a body is fed to the parser in,
	// as a gateway hands a body over in chunks.
	chunkBytes = 16 << 10
)

func usageHelp(w io.Writer) {
	fmt.Fprint(w, `usage: atrl usage [-config FILE [-rule NAME]] [-model NAME] FILE...

Reads each FILE, a saved response body (an SSE stream or a JSON body of
OpenAI chat completions or Responses, Anthropic Messages or Gemini; - is
standard input; at most 64 MiB), as the plugin reads a response, and prints
one JSON object per file, one per line, in argument order:

  {"file":"r.sse","usage":{"input":20,"output":7,"cache_read":8,"cache_creation":0,"total":27},"cost":27}

usage is what the body reports, as the plugin normalises it (input includes
cache reads and writes; total is input + output); cost is what the plugin
charges for it under the configuration, in tokens. With a configuration
that prices requests (usd_per_* windows, or pricing), cost_usd is what it
charges money windows, in US dollars, rounded up to the nanodollar as the
plugin counts them, at the configuration's pricing or, for a model it
does not price, the price catalog's (absent with pricing_catalog: off and
no price for the model); price says where the price comes from:

  {"file":"r.sse","usage":{...},"cost":27,"cost_usd":0.00012,"price":"pricing: \"gpt-4o\""}

A body that reports no usage is charged an estimate from its output text,
ceil(text_bytes / bytes_per_token) output tokens (4 bytes a token when
bytes_per_token is not set):

  {"file":"r.sse","usage":null,"estimated":true,"text_bytes":120,"cost":30}

A file that cannot be read prints {"file":"r.sse","error":"..."}; the other
files are still read, and the exit status is 1. A bad flag or configuration
stops the command with exit status 2.

Flags:

  -config FILE
	the plugin's configuration, whose token_count_strategy, token_weights
	and token_reservation.bytes_per_token set the cost, and pricing the
	cost in dollars: YAML, or JSON when FILE ends in .json, or a WasmPlugin
	manifest. Without it, the defaults: total_tokens, and 4 bytes per token.
  -rule NAME
	the configuration of a file of several (a manifest's defaultConfig
	and matchRules configs): its rule_name, or its name as atrl check
	prints it (defaultConfig, matchRules[0]).
  -model NAME
	the model to price with token_weights.models and pricing. The plugin
	prices by the model the request names; without -model, the body's own
	"model" is taken (top level of a JSON body, or the first SSE event
	naming one, also as message.model or response.model). A response may
	name a dated snapshot (gpt-4o-2024-08-06 for gpt-4o) and Gemini's names
	none: pass the request's model when weights or prices differ by model.
`)
}

// runUsage is `atrl usage`.
func runUsage(args []string, s streams) int {
	fs := flag.NewFlagSet("atrl usage", flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() { usageHelp(s.stderr) }
	configPath := fs.String("config", "", "the plugin configuration `FILE`")
	model := fs.String("model", "", "the model `NAME` to price")
	rule := fs.String("rule", "", "the configuration of the file to use, by its rule_name or `NAME` (a file of several)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitBadArgs
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(s.stderr, "atrl usage: no files; run 'atrl help usage'")
		return exitBadArgs
	}
	if *rule != "" && *configPath == "" {
		fmt.Fprintln(s.stderr, "atrl usage: -rule chooses a configuration of -config, which is not given")
		return exitBadArgs
	}
	cfg := defaultConfig()
	if *configPath != "" {
		all, err := loadConfigs(*configPath)
		if err != nil {
			fmt.Fprintln(s.stderr, "atrl usage: -config:", err)
			return exitBadArgs
		}
		c, err := pickConfig(*configPath, all, *rule)
		if err != nil {
			fmt.Fprintln(s.stderr, "atrl usage:", err)
			return exitBadArgs
		}
		cfg = c.rules
	}
	enc := json.NewEncoder(s.stdout)
	enc.SetEscapeHTML(false)
	status := exitOK
	for _, name := range fs.Args() {
		var line any
		body, err := readBody(name, s.stdin)
		if err != nil {
			line = errorLine{File: name, Error: err.Error()}
			status = exitFailed
		} else {
			line = measure(name, body, cfg, *model)
		}
		if err := enc.Encode(line); err != nil {
			fmt.Fprintln(s.stderr, "atrl usage:", err)
			return exitFailed
		}
	}
	return status
}

// usageLine is the line of a body that was read.
type usageLine struct {
	File      string     `json:"file"`
	Usage     *usageJSON `json:"usage"` // null: the body reports no usage
	Estimated bool       `json:"estimated,omitempty"`
	TextBytes *int64     `json:"text_bytes,omitempty"` // with Estimated
	Cost      int64      `json:"cost"`
	// CostUSD is what pricing charges, in US dollars (config.FormatUSD);
	// "" when the configuration has no price for the model.
	CostUSD json.Number `json:"cost_usd,omitempty"`
	// Price says where the price comes from (config.PriceSource).
	Price string `json:"price,omitempty"`
}

type usageJSON struct {
	Input         int64 `json:"input"`
	Output        int64 `json:"output"`
	CacheRead     int64 `json:"cache_read"`
	CacheCreation int64 `json:"cache_creation"`
	Total         int64 `json:"total"`
}

// errorLine is the line of a file that could not be read.
type errorLine struct {
	File  string `json:"file"`
	Error string `json:"error"`
}

// readBody reads a whole file, or stdin for "-", refusing more than
// maxBodyBytes.
func readBody(name string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > maxBodyBytes {
			return nil, tooLarge()
		}
		r = f
	}
	body, err := io.ReadAll(io.LimitReader(r, maxBodyBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxBodyBytes {
		return nil, tooLarge()
	}
	return body, nil
}

func tooLarge() error {
	return fmt.Errorf("larger than %d MiB: refused (no response body the plugin reads is that large)", maxBodyBytes>>20)
}

// measure reads a body as the plugin reads a response, and returns its line:
// its usage and cost under cfg, model (or else the body's) pricing it.
func measure(name string, body []byte, cfg *config.Config, model string) usageLine {
	var p tokenusage.Parser
	for rest := body; len(rest) > 0; {
		n := min(len(rest), chunkBytes)
		p.Write(rest[:n])
		rest = rest[n:]
	}
	p.Finish()
	if model == "" {
		model = bodyModel(body)
	}
	u, ok := p.Usage()
	if !ok {
		textBytes, output := estimate(&p, cfg)
		line := usageLine{File: name, Estimated: true, TextBytes: &textBytes, Cost: cfg.Cost.Tokens(0, output, 0, 0, model)}
		line.CostUSD, line.Price = costUSD(cfg, pricing.Tokens{Output: output}, model)
		return line
	}
	line := usageLine{
		File: name,
		Usage: &usageJSON{Input: u.Input, Output: u.Output, CacheRead: u.CacheRead,
			CacheCreation: u.CacheCreation, Total: u.Total()},
		Cost: cfg.Cost.Tokens(u.Input, u.Output, u.CacheRead, u.CacheCreation, model),
	}
	line.CostUSD, line.Price = costUSD(cfg, u.Tokens(), model)
	return line
}

// estimate is what a response that reports no usage is charged for its
// output, as the plugin charges it: its output text, in bytes as the parser
// counts them, over bytes_per_token (4 when it is not set) rounded up, as
// output tokens. (The plugin adds the estimate of the request's prompt,
// which a saved response does not have.)
func estimate(p *tokenusage.Parser, cfg *config.Config) (textBytes, output int64) {
	textBytes = p.TextBytes()
	perToken := cfg.Reservation.SizeBytesPerToken()
	return textBytes, (textBytes + perToken - 1) / perToken
}

// costUSD is what a money window is charged for these tokens, in US
// dollars, and where the price comes from, when the configuration prices
// requests (config.Pricing.Priced: money windows, or pricing); "" when it
// does not, or nothing prices the model. The route is not known: the
// model's name alone finds its price.
func costUSD(cfg *config.Config, t pricing.Tokens, model string) (json.Number, string) {
	if _, source, ok := cfg.Pricing.PriceOf(model, ""); ok && cfg.Pricing.Priced() {
		return json.Number(config.FormatUSD(cfg.Pricing.NanoUSD(t, model, ""))), source.String()
	}
	return "", ""
}

// bodyModel returns the model a response body names, or "": the top-level
// "model" of a JSON body, or else the first one an SSE data event names, at
// its top level (OpenAI chat) or in its message (Anthropic's message_start)
// or response (OpenAI Responses' events).
func bodyModel(body []byte) string {
	if trimmed := bytes.TrimLeft(body, " \t\r\n\ufeff"); len(trimmed) > 0 && trimmed[0] == '{' {
		if m := gjson.GetBytes(trimmed, "model"); m.Type == gjson.String {
			return m.Str
		}
		return ""
	}
	for rest := body; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r"), []byte("data:"))
		if !ok {
			continue
		}
		data = bytes.TrimLeft(data, " ")
		if len(data) == 0 || data[0] != '{' {
			continue // [DONE], or not an object
		}
		for _, path := range [...]string{"model", "message.model", "response.model"} {
			if m := gjson.GetBytes(data, path); m.Type == gjson.String && m.Str != "" {
				return m.Str
			}
		}
	}
	return ""
}
