package pricing

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// perMillion is a price in US dollars per million tokens, in picodollars
// per token.
func perMillion(usd float64) int64 { return int64(math.Round(usd * 1_000_000)) }

func TestMaxTokensIsTheEstimatesBound(t *testing.T) {
	require.Equal(t, estimate.MaxTokens, int64(MaxTokens))
}

func TestWithDefaultsFillsUnsetKindsFromInputAndOutput(t *testing.T) {
	p := Price{Input: 3, Output: 15, CacheRead: 1, CacheWrite: Unset, Reasoning: Unset,
		InputAudio: 40, OutputAudio: Unset, InputImage: Unset, OutputImage: 30}.WithDefaults()
	require.Equal(t, Price{Input: 3, Output: 15, CacheRead: 1, CacheWrite: 3, Reasoning: 15,
		InputAudio: 40, OutputAudio: 15, InputImage: 3, OutputImage: 30}, p)
}

func TestNanoUSDPricesEachKindAtItsOwnPrice(t *testing.T) {
	// gpt-4o-audio-preview-like: text $2.50/$10, audio $40/$80 per million.
	p := Price{Input: perMillion(2.5), Output: perMillion(10), CacheRead: perMillion(1.25), CacheWrite: perMillion(2.5),
		Reasoning: perMillion(10), InputAudio: perMillion(40), OutputAudio: perMillion(80),
		InputImage: perMillion(2.5), OutputImage: perMillion(10)}
	// 1,000 input tokens of which 100 cached and 300 audio; 500 output of
	// which 200 audio: 600×2.5 + 100×1.25 + 300×40 + 300×10 + 200×80 µ$.
	got := p.NanoUSD(Tokens{Input: 1000, CacheRead: 100, InputAudio: 300, Output: 500, OutputAudio: 200})
	require.Equal(t, int64(600*2500+100*1250+300*40_000+300*10_000+200*80_000), got)
	// A response reporting only totals is text.
	require.Equal(t, int64(1000*2500+500*10_000), p.NanoUSD(Tokens{Input: 1000, Output: 500}))
}

func TestNanoUSDLongContextTierPricesTheWholeRequest(t *testing.T) {
	long := Price{Input: perMillion(6), Output: perMillion(22.5), CacheRead: perMillion(0.6), CacheWrite: perMillion(7.5)}
	p := Price{Input: perMillion(3), Output: perMillion(15), CacheRead: perMillion(0.3), CacheWrite: perMillion(3.75),
		Long: &long, LongAbove: 200_000}
	require.Equal(t, int64(200_000*3000+1000*15_000), p.NanoUSD(Tokens{Input: 200_000, Output: 1000}), "at the threshold: base")
	require.Equal(t, int64(200_001*6000+1000*22_500), p.NanoUSD(Tokens{Input: 200_001, Output: 1000}), "above: every token at the tier")
}

func TestNanoUSDIsBoundedAndRoundsUp(t *testing.T) {
	p := Price{Input: 500, Output: perMillion(600), CacheRead: 1, CacheWrite: 1}
	require.Equal(t, int64(1), p.NanoUSD(Tokens{Input: 1}), "half a nanodollar rounds up")
	require.Equal(t, int64(0), p.NanoUSD(Tokens{Input: -7, Output: -1, CacheRead: -3}), "negative counts are none")
	// Parts that claim more than their whole leave no text, and are each
	// charged in full (the dearer reading).
	require.Equal(t, int64(10), p.NanoUSD(Tokens{Input: 5, CacheRead: 10_000}))
	// 10^15 output tokens (a larger count is bounded to it) at $600 per
	// million: 6×10^20 nanodollars, past int64: saturates.
	require.Equal(t, int64(math.MaxInt64), p.NanoUSD(Tokens{Output: math.MaxInt64}))
}

func TestStrictestTakesTheDearestOfEachKindAndTier(t *testing.T) {
	long := Price{Input: 6, Output: 22}
	a := Price{Input: 3, Output: 15, CacheRead: 1, Long: &long, LongAbove: 200_000}
	b := Price{Input: 5, Output: 10, CacheWrite: 9, OutputAudio: 80}
	require.Equal(t, Price{Input: 6, Output: 22, CacheRead: 1, CacheWrite: 9, OutputAudio: 80}, Strictest(a, b))
}

func TestPriceStringWritesListPrices(t *testing.T) {
	long := Price{Input: perMillion(6), Output: perMillion(22.5), CacheRead: perMillion(0.6), CacheWrite: perMillion(7.5),
		Reasoning: Unset, InputAudio: Unset, OutputAudio: Unset, InputImage: Unset, OutputImage: Unset}
	p := Price{Input: perMillion(3), Output: perMillion(15), CacheRead: perMillion(0.3), CacheWrite: perMillion(3.75),
		Reasoning: Unset, InputAudio: perMillion(0.075), OutputAudio: Unset, InputImage: Unset, OutputImage: Unset, Long: &long, LongAbove: 200_000}.WithDefaults()
	require.Equal(t, "$3 input, $15 output, $0.3 cache read, $3.75 cache write, $0.075 input audio per million tokens; "+
		"above 200000 input tokens, $6 input, $22.5 output, $0.6 cache read, $7.5 cache write per million tokens", p.String())
	require.Equal(t, "$0.000001 input, $0 output, $0 cache read, $0 cache write, $0 input audio, $0 input image per million tokens",
		Price{Input: 1}.String(), "kinds that differ from their default are written")
}
