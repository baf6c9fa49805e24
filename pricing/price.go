// Package pricing is what models' tokens cost: a price per kind of token,
// what a response's tokens cost at it, and a catalog of public list prices
// (catalog.go). It knows nothing of configuration or of proxy-wasm.
//
// Money is counted in integers, never in floats: a price is held in
// picodollars (10^-12 USD) per token, exact for list prices with up to six
// decimals (in US dollars per million tokens), and a cost in nanodollars
// (10^-9 USD), rounded up.
package pricing

import (
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Units of money.
const (
	PicoPerDollar = 1_000_000_000_000
	NanoPerDollar = 1_000_000_000
	picoPerNano   = 1_000
)

// MaxTokens bounds each count NanoUSD is given (larger counts are taken as
// it, negative ones as 0): 10^15, the bound of every token count the plugin
// reads from a client or an upstream.
const MaxTokens = 1_000_000_000_000_000

// Price is what one token of each kind costs a model, in picodollars. A
// response's input tokens are priced as cache reads, cache writes, audio,
// images, or else as Input; its output tokens as reasoning, audio, images,
// or else as Output.
type Price struct {
	Input       int64 // input tokens of text (and of media the model prices as text)
	Output      int64 // output tokens of text
	CacheRead   int64 // input tokens read from a prompt cache
	CacheWrite  int64 // input tokens written to a prompt cache
	Reasoning   int64 // output tokens spent reasoning (thinking)
	InputAudio  int64 // input tokens of audio
	OutputAudio int64 // output tokens of audio
	InputImage  int64 // input tokens of images
	OutputImage int64 // output tokens of images

	// Long, when set, is the price of every token of a request whose
	// input is more than LongAbove tokens (a long-context tier: the whole
	// request is priced at it, as Anthropic and Google bill).
	Long      *Price
	LongAbove int64
}

// Unset marks a kind a price does not give; WithDefaults fills it.
const Unset int64 = -1

// WithDefaults fills the kinds marked Unset: cache reads and writes,
// input audio and images at the Input price; reasoning, output audio and
// images at the Output price. Input and Output must be set.
func (p Price) WithDefaults() Price {
	fill := func(kind *int64, from int64) {
		if *kind == Unset {
			*kind = from
		}
	}
	fill(&p.CacheRead, p.Input)
	fill(&p.CacheWrite, p.Input)
	fill(&p.InputAudio, p.Input)
	fill(&p.InputImage, p.Input)
	fill(&p.Reasoning, p.Output)
	fill(&p.OutputAudio, p.Output)
	fill(&p.OutputImage, p.Output)
	if p.Long != nil {
		long := p.Long.WithDefaults()
		p.Long = &long
	}
	return p
}

// Tokens are a response's tokens (its usage, or its estimate) as the
// usage reports them: Input counts every prompt token, cache reads and
// writes, audio and images included; Output every completion token,
// reasoning, audio and images included.
type Tokens struct {
	Input, Output            int64
	CacheRead, CacheWrite    int64 // parts of Input
	InputAudio, InputImage   int64 // parts of Input
	Reasoning                int64 // part of Output
	OutputAudio, OutputImage int64 // parts of Output
}

// NanoUSD is what these tokens cost at this price, in nanodollars, rounded
// up, at most math.MaxInt64. Each count is taken in [0, MaxTokens], so that
// no client's or upstream's numbers make the cost negative or inexact; a
// whole's text is what its parts leave of it, none when they claim more
// than it (each part is then still charged in full: the dearer reading).
func (p *Price) NanoUSD(t Tokens) int64 {
	input, output := bound(t.Input), bound(t.Output)
	if p.Long != nil && input > p.LongAbove {
		p = p.Long
	}
	// Each part is taken from its whole; what is left is text.
	part := func(whole *int64, n int64) int64 {
		n = bound(n)
		*whole = max(*whole-n, 0)
		return n
	}
	cacheRead, cacheWrite := part(&input, t.CacheRead), part(&input, t.CacheWrite)
	inAudio, inImage := part(&input, t.InputAudio), part(&input, t.InputImage)
	reasoning := part(&output, t.Reasoning)
	outAudio, outImage := part(&output, t.OutputAudio), part(&output, t.OutputImage)
	// Nine terms of at most 10^15 tokens × 10^12 picodollars: 128 bits.
	var hi, lo uint64
	for _, term := range [...][2]int64{
		{input, p.Input}, {output, p.Output}, {cacheRead, p.CacheRead}, {cacheWrite, p.CacheWrite},
		{inAudio, p.InputAudio}, {inImage, p.InputImage},
		{reasoning, p.Reasoning}, {outAudio, p.OutputAudio}, {outImage, p.OutputImage},
	} {
		h, l := bits.Mul64(uint64(term[0]), uint64(max(term[1], 0)))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if hi >= picoPerNano { // the quotient would not fit 64 bits
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, picoPerNano)
	if r != 0 {
		q++
	}
	return int64(min(q, math.MaxInt64))
}

// Strictest is the largest price of each kind of a and b (a long-context
// tier's included): what a model that may be either costs at most.
func Strictest(a, b Price) Price {
	top := func(p Price) Price {
		if p.Long == nil {
			return p
		}
		l := *p.Long
		l.Long = nil
		return Strictest(Price{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite,
			Reasoning: p.Reasoning, InputAudio: p.InputAudio, OutputAudio: p.OutputAudio,
			InputImage: p.InputImage, OutputImage: p.OutputImage}, l)
	}
	a, b = top(a), top(b)
	return Price{
		Input: max(a.Input, b.Input), Output: max(a.Output, b.Output),
		CacheRead: max(a.CacheRead, b.CacheRead), CacheWrite: max(a.CacheWrite, b.CacheWrite),
		Reasoning: max(a.Reasoning, b.Reasoning), InputAudio: max(a.InputAudio, b.InputAudio),
		OutputAudio: max(a.OutputAudio, b.OutputAudio), InputImage: max(a.InputImage, b.InputImage),
		OutputImage: max(a.OutputImage, b.OutputImage),
	}
}

func bound(n int64) int64 { return min(max(n, 0), MaxTokens) }

// String writes a price as list prices are written, in US dollars per
// million tokens: input and output, cache reads and writes, and the other
// kinds where they differ from the price they default to; then the
// long-context tier's.
func (p Price) String() string {
	s := "$" + DollarsPerMillion(p.Input) + " input, $" + DollarsPerMillion(p.Output) + " output, $" +
		DollarsPerMillion(p.CacheRead) + " cache read, $" + DollarsPerMillion(p.CacheWrite) + " cache write"
	for _, k := range [...]struct {
		name         string
		price, basis int64
	}{
		{"reasoning", p.Reasoning, p.Output}, {"input audio", p.InputAudio, p.Input}, {"output audio", p.OutputAudio, p.Output},
		{"input image", p.InputImage, p.Input}, {"output image", p.OutputImage, p.Output},
	} {
		if k.price != k.basis {
			s += ", $" + DollarsPerMillion(k.price) + " " + k.name
		}
	}
	s += " per million tokens"
	if p.Long != nil {
		s += "; above " + strconv.FormatInt(p.LongAbove, 10) + " input tokens, " + p.Long.String()
	}
	return s
}

// DollarsPerMillion writes picodollars per token as US dollars per million
// tokens, with as many decimals as it needs (at most six): 2.5, 0.075.
func DollarsPerMillion(pico int64) string {
	const scale = PicoPerDollar / 1_000_000 // picodollars per token in a dollar per million
	s := strconv.FormatInt(pico/scale, 10)
	if frac := pico % scale; frac != 0 {
		f := strconv.FormatInt(frac+scale, 10)[1:]
		s += "." + strings.TrimRight(f, "0")
	}
	return s
}
