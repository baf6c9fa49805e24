package pricing

import (
	"regexp"
	"testing"
)

// Prices below are in picodollars per token, which is US dollars per
// million tokens × 10^6: $2.50 / MTok is 2_500_000. Where a row says
// "page", its prices were checked by hand against the provider's pricing
// page (or its archived copy); the others are the database's.

// listedPrice is what a test checks of a listed price: input, output,
// cache reads and writes, and the long-context tier's input and output.
type listedPrice struct {
	input, output, cacheRead, cacheWrite int64
	longAbove, longInput, longOutput     int64 // 0: no long-context tier
}

func TestLookupFindsTheListPrice(t *testing.T) {
	for _, tc := range []struct {
		name, route string
		provider    string // the database's provider and model
		model       string
		want        listedPrice
	}{
		// OpenAI (page: developers.openai.com/api/docs/pricing, gpt-4o and
		// gpt-4o-mini; cached input 50 %, no cache write price: at Input).
		{"gpt-4o", "", "openai", "gpt-4o", listedPrice{2_500_000, 10_000_000, 1_250_000, 2_500_000, 0, 0, 0}},
		{"gpt-4o-2024-08-06", "", "openai", "gpt-4o", listedPrice{2_500_000, 10_000_000, 1_250_000, 2_500_000, 0, 0, 0}},
		{"gpt-4o-mini", "", "openai", "gpt-4o-mini", listedPrice{150_000, 600_000, 75_000, 150_000, 0, 0, 0}},
		{"GPT-4o-Mini-2024-07-18", "", "openai", "gpt-4o-mini", listedPrice{150_000, 600_000, 75_000, 150_000, 0, 0, 0}},
		// o3's price from its 2025-06-10 cut (a start_date condition; page: $2 / $8).
		{"o3", "", "openai", "o3", listedPrice{2_000_000, 8_000_000, 500_000, 2_000_000, 0, 0, 0}},
		// An embedding model prices input only: output costs 0.
		{"text-embedding-3-small", "", "openai", "text-embedding-3-small", listedPrice{20_000, 0, 20_000, 20_000, 0, 0, 0}},
		// A compact date the model's pattern only matches dashed (-2026-07-30).
		{"gpt-5.6-luna-20260730", "", "openai", "gpt-5.6-luna", listedPrice{200_000, 1_200_000, 20_000, 250_000, 271_999, 400_000, 1_800_000}},
		// LiteLLM's spelling, and an Azure deployment (azure's fallback providers).
		{"openai/gpt-4o", "", "openai", "gpt-4o", listedPrice{2_500_000, 10_000_000, 1_250_000, 2_500_000, 0, 0, 0}},
		{"gpt-4o", "azure", "openai", "gpt-4o", listedPrice{2_500_000, 10_000_000, 1_250_000, 2_500_000, 0, 0, 0}},

		// Anthropic (page: docs.anthropic.com/en/docs/about-claude/pricing:
		// Sonnet 4.5 $3 / $15, cache write $3.75, read $0.30; over 200K input
		// tokens $6 / $22.50; Haiku 3 $0.25 / $1.25, write $0.30, read $0.03).
		{"claude-sonnet-4-5-20250929", "anthropic", "anthropic", "claude-sonnet-4-5", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 200_000, 6_000_000, 22_500_000}},
		{"claude-sonnet-4-5-20250929", "", "anthropic", "claude-sonnet-4-5", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 200_000, 6_000_000, 22_500_000}},
		{"claude-3-haiku-20240307", "", "anthropic", "claude-3-haiku", listedPrice{250_000, 1_250_000, 30_000, 300_000, 0, 0, 0}},
		{"anthropic/claude-3-haiku-20240307", "", "anthropic", "claude-3-haiku", listedPrice{250_000, 1_250_000, 30_000, 300_000, 0, 0, 0}},
		// Claude on Vertex AI: Google's own entry.
		{"claude-sonnet-4-5@20250929", "google", "google", "claude-sonnet-4-5", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 200_000, 6_000_000, 22_500_000}},

		// Bedrock ids, with and without the route saying so (page: AWS's
		// Bedrock documentation: global cross-Region inference for Sonnet 4.5
		// about 10 % cheaper than a geography's, $3.30 / $16.50 against $3 / $15;
		// Nova Pro $0.80 / $3.20, cached $0.20; Llama 3.1 70B $0.72 / $0.72).
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", "aws", "aws", "regional.anthropic.claude-3-5-sonnet-20240620-v1:0", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 0, 0, 0}},
		{"anthropic.claude-3-5-sonnet-20240620-v1:0", "", "aws", "regional.anthropic.claude-3-5-sonnet-20240620-v1:0", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 0, 0, 0}},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "aws", "aws", "regional.anthropic.claude-sonnet-4-5-20250929-v1:0", listedPrice{3_300_000, 16_500_000, 330_000, 4_125_000, 0, 0, 0}},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", "", "aws", "global.anthropic.claude-sonnet-4-5-20250929-v1:0", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 0, 0, 0}},
		{"eu.anthropic.claude-3-7-sonnet-20250219-v1:0", "", "aws", "regional.anthropic.claude-3-7-sonnet-20250219-v1:0", listedPrice{3_000_000, 15_000_000, 300_000, 3_750_000, 0, 0, 0}},
		{"meta.llama3-1-70b-instruct-v1:0", "", "aws", "meta.llama3-1-70b-instruct-v1:0", listedPrice{720_000, 720_000, 720_000, 720_000, 0, 0, 0}},
		{"us.meta.llama3-2-90b-instruct-v1:0", "aws", "aws", "meta.llama3-2-90b-instruct-v1:0", listedPrice{720_000, 720_000, 720_000, 720_000, 0, 0, 0}},
		{"amazon.nova-pro-v1:0", "", "aws", "amazon.nova-pro-v1:0", listedPrice{800_000, 3_200_000, 200_000, 800_000, 0, 0, 0}},
		{"bedrock/amazon.nova-pro-v1:0", "", "aws", "amazon.nova-pro-v1:0", listedPrice{800_000, 3_200_000, 200_000, 800_000, 0, 0, 0}},

		// Gemini and Vertex names (page: ai.google.dev's pricing, 2.5 Pro
		// $1.25 / $10, over 200K input tokens $2.50 / $15; 2.5 Flash $0.30 /
		// $2.50; 1.5 Pro's tier above 128K).
		{"gemini-2.5-pro", "google", "google", "gemini-2.5-pro", listedPrice{1_250_000, 10_000_000, 125_000, 1_250_000, 200_000, 2_500_000, 15_000_000}},
		{"gemini-2.5-pro", "", "google", "gemini-2.5-pro", listedPrice{1_250_000, 10_000_000, 125_000, 1_250_000, 200_000, 2_500_000, 15_000_000}},
		{"vertex_ai/gemini-2.5-pro", "", "google", "gemini-2.5-pro", listedPrice{1_250_000, 10_000_000, 125_000, 1_250_000, 200_000, 2_500_000, 15_000_000}},
		{"gemini-2.0-flash-001", "google", "google", "gemini-2.0-flash", listedPrice{100_000, 400_000, 25_000, 100_000, 0, 0, 0}},
		{"  Gemini-2.5-Flash ", "", "google", "gemini-2.5-flash", listedPrice{300_000, 2_500_000, 30_000, 300_000, 0, 0, 0}},
		{"gemini-1.5-pro-002", "", "google", "gemini-1.5-pro", listedPrice{1_250_000, 5_000_000, 1_250_000, 1_250_000, 128_000, 2_500_000, 10_000_000}},
		// gemini-2.5-pro's pattern leaves its TTS variants out (a lookahead
		// the generator rewrote for RE2).
		{"gemini-2.5-pro-preview-tts", "", "google", "gemini-2.5-pro-tts", listedPrice{1_000_000, 20_000_000, 1_000_000, 1_000_000, 0, 0, 0}},

		// Mistral (page: Mistral Large 24.11 $2 / $6, which the database
		// prices the -latest alias as), Groq (page: $0.59 / $0.79).
		{"mistral-large-latest", "", "mistral", "mistral-large", listedPrice{2_000_000, 6_000_000, 2_000_000, 2_000_000, 0, 0, 0}},
		{"llama-3.3-70b-versatile", "", "groq", "llama-3.3-70b-versatile", listedPrice{590_000, 790_000, 590_000, 590_000, 0, 0, 0}},
		{"groq/llama-3.3-70b-versatile", "", "groq", "llama-3.3-70b-versatile", listedPrice{590_000, 790_000, 590_000, 590_000, 0, 0, 0}},
		// DeepSeek: the dearer of its standard and off-peak prices (page:
		// api-docs.deepseek.com, standard UTC 00:30-16:30: chat $0.27 /
		// $1.10, hit $0.07; reasoner $0.55 / $2.19, hit $0.14).
		{"deepseek-chat", "", "deepseek", "deepseek-chat", listedPrice{270_000, 1_100_000, 70_000, 270_000, 0, 0, 0}},
		{"deepseek-reasoner", "", "deepseek", "deepseek-reasoner", listedPrice{550_000, 2_190_000, 140_000, 550_000, 0, 0, 0}},
		// xAI (page: grok-3's $3 / $15, cached $0.75, as grok-4's), Cohere.
		{"grok-4", "", "x-ai", "grok-4-0709", listedPrice{3_000_000, 15_000_000, 750_000, 3_000_000, 0, 0, 0}},
		{"xai/grok-4", "", "x-ai", "grok-4-0709", listedPrice{3_000_000, 15_000_000, 750_000, 3_000_000, 0, 0, 0}},
		{"command-r-plus", "", "cohere", "command-r-plus", listedPrice{2_500_000, 10_000_000, 2_500_000, 2_500_000, 0, 0, 0}},
		// Open models on their hosts, named as those hosts name them.
		{"meta-llama/Llama-3.3-70B-Instruct-Turbo", "", "together", "meta-llama/Llama-3.3-70B-Instruct-Turbo", listedPrice{880_000, 880_000, 880_000, 880_000, 0, 0, 0}},
		{"accounts/fireworks/models/llama-v3p1-8b-instruct", "", "fireworks", "llama-v3p1-8b-instruct", listedPrice{200_000, 200_000, 200_000, 200_000, 0, 0, 0}},
	} {
		l, ok := Lookup(tc.name, tc.route)
		if !ok {
			t.Errorf("Lookup(%q, %q): not found, want %s/%s", tc.name, tc.route, tc.provider, tc.model)
			continue
		}
		got := listedPrice{l.Price.Input, l.Price.Output, l.Price.CacheRead, l.Price.CacheWrite, 0, 0, 0}
		if l.Price.Long != nil {
			got.longAbove, got.longInput, got.longOutput = l.Price.LongAbove, l.Price.Long.Input, l.Price.Long.Output
		}
		if l.Provider != tc.provider || l.Model != tc.model || got != tc.want {
			t.Errorf("Lookup(%q, %q) = %s/%s %+v, want %s/%s %+v", tc.name, tc.route, l.Provider, l.Model, got, tc.provider, tc.model, tc.want)
		}
	}
}

func TestLookupFindsNoPrice(t *testing.T) {
	for _, tc := range []struct{ name, route, why string }{
		{"", "", "no name"},
		{"   ", "", "no name"},
		{"acme-model-7b", "", "a model no provider lists"},
		{"acme-model-7b", "azure", "a model no provider lists, whatever the route"},
		{"claude", "", "a family, not a model"},
		{"my-company/gpt-4o", "", "a prefix that names no provider: the name as a whole is no model"},
		{"whisper-1", "", "priced per hour of audio, not in tokens"},
		{"omni-moderation-latest", "", "free: the database gives no token price, and the search stops there"},
		{"mistral-ocr-latest", "", "priced per page"},
	} {
		if l, ok := Lookup(tc.name, tc.route); ok {
			t.Errorf("Lookup(%q, %q) = %s/%s, want none: %s", tc.name, tc.route, l.Provider, l.Model, tc.why)
		}
	}
}

func TestLookupPricesEveryKind(t *testing.T) {
	c := theCatalog()
	listed := 0
	for _, p := range c.providers {
		for i, l := range p.models {
			if !p.priced[i] {
				continue
			}
			listed++
			prices := []*Price{&l.Price}
			if l.Price.Long != nil {
				prices = append(prices, l.Price.Long)
				if l.Price.LongAbove <= 0 {
					t.Errorf("%s/%s: a long-context tier above %d tokens", l.Provider, l.Model, l.Price.LongAbove)
				}
			}
			for _, pr := range prices {
				for _, kind := range []int64{pr.Input, pr.Output, pr.CacheRead, pr.CacheWrite, pr.Reasoning,
					pr.InputAudio, pr.OutputAudio, pr.InputImage, pr.OutputImage} {
					if kind < 0 || kind > PicoPerDollar {
						t.Errorf("%s/%s: price %+v has a kind outside [0, 10^12] picodollars", l.Provider, l.Model, *pr)
					}
				}
			}
		}
	}
	if listed < 400 {
		t.Errorf("%d models listed, want the database's hundreds", listed)
	}
}

func TestProviderOf(t *testing.T) {
	for _, tc := range []struct{ name, route, want string }{
		{"claude-opus-9", "", "anthropic"},
		{"claude-opus-9", "google", "anthropic"},
		{"us.anthropic.claude-opus-9-v1:0", "", "aws"},
		{"anthropic.claude-opus-9-v1:0", "", "aws"},
		{"apac.meta.llama9-v1:0", "", "aws"},
		{"gemini-9-pro", "", "google"},
		{"gpt-9", "azure", "openai"},
		{"mistral-huge-2030", "", "mistral"},
		{"openai/some-new-model", "", "openai"},
		{"vertex_ai/some-new-model", "", "google"},
		{"some-new-model", "aws", "aws"},
		{"some-new-model", "azure", "azure"},
		{"some-new-model", "", "openai"},
		{"some-new-model", "not-a-provider", "openai"},
	} {
		if got := ProviderOf(tc.name, tc.route); got != tc.want {
			t.Errorf("ProviderOf(%q, %q) = %q, want %q", tc.name, tc.route, got, tc.want)
		}
	}
}

// Dearest is no lower than any of the provider's models, long-context tier
// included, and each of its kinds is some model's.
func TestDearest(t *testing.T) {
	c := theCatalog()
	kinds := func(p Price) [9]int64 {
		return [9]int64{p.Input, p.Output, p.CacheRead, p.CacheWrite, p.Reasoning, p.InputAudio, p.OutputAudio, p.InputImage, p.OutputImage}
	}
	var all [9]int64
	for _, p := range c.providers {
		d := kinds(Dearest(p.id))
		var top [9]int64
		for i, l := range p.models {
			if !p.priced[i] {
				continue
			}
			for _, pr := range []*Price{&l.Price, l.Price.Long} {
				if pr == nil {
					continue
				}
				for k, v := range kinds(*pr) {
					top[k] = max(top[k], v)
					all[k] = max(all[k], v)
				}
			}
		}
		if d != top {
			t.Errorf("Dearest(%q) = %v, want each kind's largest %v", p.id, d, top)
		}
	}
	if d := kinds(Dearest("not-a-provider")); d != all {
		t.Errorf("Dearest of an unknown provider = %v, want the catalog's largest %v", d, all)
	}
	// Anthropic's dearest output: Claude Opus 4.1's $75 / MTok (page).
	if got := Dearest("anthropic").Output; got != 75_000_000 {
		t.Errorf("Dearest(anthropic).Output = %d, want 75_000_000", got)
	}
}

func TestSource(t *testing.T) {
	if !regexp.MustCompile(`^@pydantic/genai-prices \d+\.\d+\.\d+ \(npm, MIT\), generated \d{4}-\d{2}-\d{2}$`).MatchString(Source) {
		t.Errorf("Source = %q", Source)
	}
}

func TestDashDates(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"claude-3-5-sonnet-20240620", "claude-3-5-sonnet-2024-06-20"},
		{"anthropic.claude-3-haiku-20240307-v1:0", "anthropic.claude-3-haiku-2024-03-07-v1:0"},
		{"m-20240229:0", "m-2024-02-29:0"}, // a leap day
		{"m-20230229", "m-20230229"},       // no such day
		{"m-20241301", "m-20241301"},       // no such month
		{"m-202406201", "m-202406201"},     // nine digits
		{"m-19990101", "m-19990101"},       // not 20xx
		{"m-20240101-20250101", "m-2024-01-01-2025-01-01"},
		{"gpt-4o", "gpt-4o"},
	} {
		if got := dashDates(tc.in); got != tc.want {
			t.Errorf("dashDates(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The bytes an anchored regexp's matches begin with, which rule it out
// before it runs; none told for one that may begin anywhere or match the
// empty string.
func TestFirstBytes(t *testing.T) {
	for _, tc := range []struct{ regexp, want string }{
		{`^o[134]`, "o"},
		{`^(?:labs-)?(?:(?:mi|code|dev|magi|mini)stral|mixtral|pixtral|voxtral|open-(?:mistral|mixtral))`, "cdlmopv"},
		{`^gpt-5\.6-luna-\d{4}-\d{2}-\d{2}$`, "g"},
		{`^(?:x|y)z|^w`, "any"}, // anchored in each alternative only: not told
		{`gpt-5`, "any"},
		{`^(?:.*-tts)`, "any"},
		{`^a?`, "any"},
		{`^(?i)abc`, "any"},
	} {
		got := "any"
		if set := firstBytes(tc.regexp); set != nil {
			got = ""
			for c := 0; c < 256; c++ {
				if set[c/64]&(1<<(c%64)) != 0 {
					got += string(rune(c))
				}
			}
		}
		if got != tc.want {
			t.Errorf("firstBytes(%s) = %q, want %q", tc.regexp, got, tc.want)
		}
	}
}

// Lookup runs on requests: a lowercase name costs no allocation, found or
// not.
func TestLookupAllocatesNothing(t *testing.T) {
	for _, tc := range [][2]string{
		{"gpt-4o", ""},
		{"claude-sonnet-4-5-20250929", "anthropic"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "aws"},
		{"gemini-2.5-pro", "google"},
		{"openai/gpt-4o", ""},
		{"acme-model-7b", ""},
		{"acme-model-7b", "azure"},
	} {
		Lookup(tc[0], tc[1])
		if n := testing.AllocsPerRun(100, func() { Lookup(tc[0], tc[1]) }); n != 0 {
			t.Errorf("Lookup(%q, %q): %v allocations", tc[0], tc[1], n)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	for _, bc := range []struct{ name, model, route string }{
		{"hit/exact", "gpt-4o", ""},
		{"hit/pattern", "claude-sonnet-4-5-20250929", "anthropic"},
		{"hit/bedrock", "us.anthropic.claude-sonnet-4-5-20250929-v1:0", "aws"},
		{"hit/litellm", "openai/gpt-4o", ""},
		{"hit/capitals", "GPT-4o", ""},
		{"miss", "acme-model-7b", ""},
		{"miss/route", "acme-model-7b", "azure"},
		{"miss/dated", "acme-model-20250101", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			Lookup(bc.model, bc.route)
			b.ReportAllocs()
			for b.Loop() {
				Lookup(bc.model, bc.route)
			}
		})
	}
}
