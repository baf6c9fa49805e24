package limiter

import (
	"math"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/tokenusage"
)

// What the plugin charges, counted per route, upstream, model and consumer
// (metrics.go: a series) when a request settles: the usage the response
// reported, token by kind; an estimate's tokens apart, when it reported
// none; what the token windows and the money windows were charged; and how
// far a reservation's estimate was from the charge. And the rejections, by
// the kind of limit that closed.

// seriesMetric is a metric every series may have, defined on first use.
type seriesMetric uint8

const (
	// The usage the response reported, as the usage parser normalizes it
	// (tokenusage.Usage): input tokens, cache reads and writes included;
	// the cache reads and writes among them; output tokens, reasoning
	// included; the reasoning among them, and the audio and images among
	// the input and the output, where the provider says.
	metricInputTokens seriesMetric = iota
	metricOutputTokens
	metricCacheReadTokens
	metricCacheWriteTokens
	metricReasoningTokens
	metricInputAudioTokens
	metricInputImageTokens
	metricOutputAudioTokens
	metricOutputImageTokens
	// The estimate charged for a response that reported no usage: the
	// prompt's estimate and the output text's (see request.estimated).
	metricEstimatedInputTokens
	metricEstimatedOutputTokens
	// What the token windows were charged, in the configured cost (total or
	// weighted tokens), estimates included; and with pricing, what the
	// money windows were charged, in nanodollars.
	metricChargedTokens
	metricCostNanodollars
	// Rejections by the kind of limit that closed (also counted in
	// token_ratelimit_count).
	metricRejectedTokens
	metricRejectedMoney
	metricRejectedRequests
	metricRejectedConcurrency
	// firstSeriesHistogram and the metrics after it are histograms.
	firstSeriesHistogram
	// metricEstimateRatio is a reservation's estimate as a percentage of
	// the tokens the request was charged (see estimateRatioPercent).
	metricEstimateRatio = firstSeriesHistogram
	numSeriesMetrics    = metricEstimateRatio + 1
)

// seriesMetricNames names them, after the series' prefix.
var seriesMetricNames = [numSeriesMetrics]string{
	metricInputTokens:           "token_ratelimit_input_tokens",
	metricOutputTokens:          "token_ratelimit_output_tokens",
	metricCacheReadTokens:       "token_ratelimit_cache_read_tokens",
	metricCacheWriteTokens:      "token_ratelimit_cache_write_tokens",
	metricReasoningTokens:       "token_ratelimit_reasoning_tokens",
	metricInputAudioTokens:      "token_ratelimit_input_audio_tokens",
	metricInputImageTokens:      "token_ratelimit_input_image_tokens",
	metricOutputAudioTokens:     "token_ratelimit_output_audio_tokens",
	metricOutputImageTokens:     "token_ratelimit_output_image_tokens",
	metricEstimatedInputTokens:  "token_ratelimit_estimated_input_tokens",
	metricEstimatedOutputTokens: "token_ratelimit_estimated_output_tokens",
	metricChargedTokens:         "token_ratelimit_charged_tokens",
	metricCostNanodollars:       "token_ratelimit_cost_nanodollars",
	metricRejectedTokens:        "token_ratelimit_rejected_tokens_count",
	metricRejectedMoney:         "token_ratelimit_rejected_money_count",
	metricRejectedRequests:      "token_ratelimit_rejected_requests_count",
	metricRejectedConcurrency:   "token_ratelimit_rejected_concurrency_count",
	metricEstimateRatio:         "token_ratelimit_estimate_ratio_percent",
}

// rejectedBy is the counter of rejections by a limit of kind k.
var rejectedBy = [budget.KindUSD + 1]seriesMetric{
	budget.KindTokens:     metricRejectedTokens,
	budget.KindRequests:   metricRejectedRequests,
	budget.KindConcurrent: metricRejectedConcurrency,
	budget.KindUSD:        metricRejectedMoney,
}

// maxEstimateRatioPercent bounds what the estimate's histogram records: a
// reservation 1,000 times its charge or more records 100,000.
const maxEstimateRatioPercent = 100_000

// settlement is what a settled request's charge was made of.
type settlement uint8

const (
	settledNothing   settlement = iota // nothing charged: an upstream error without usage
	settledReported                    // the usage the response reported
	settledEstimated                   // an estimate: the response reported none
)

// countSpend counts what a request was charged when it settled: the usage
// (reported, or the estimate's prompt and output tokens in Input and
// Output), cost (what its windows were charged), and with exact (a
// complete, successful response that reported its usage, so cost is that
// usage's) how its reservation compared.
func (r *request) countSpend(how settlement, u tokenusage.Usage, cost budget.Amounts, exact bool) {
	if how == settledNothing {
		return
	}
	s := r.pc.metrics.seriesOf(requestHeader(consumerHeader), r.servedModel())
	if how == settledEstimated {
		s.count(metricEstimated)
		s.add(metricEstimatedInputTokens, u.Input)
		s.add(metricEstimatedOutputTokens, u.Output)
	} else {
		s.add(metricInputTokens, u.Input)
		s.add(metricOutputTokens, u.Output)
		s.add(metricCacheReadTokens, u.CacheRead)
		s.add(metricCacheWriteTokens, u.CacheCreation)
		s.add(metricReasoningTokens, u.Reasoning)
		s.add(metricInputAudioTokens, u.InputAudio) // none: no counter, no host call
		s.add(metricInputImageTokens, u.InputImage)
		s.add(metricOutputAudioTokens, u.OutputAudio)
		s.add(metricOutputImageTokens, u.OutputImage)
		if exact && r.reserved.Tokens > 0 && cost.Tokens > 0 {
			s.record(metricEstimateRatio, estimateRatioPercent(r.reserved.Tokens, cost.Tokens))
		}
	}
	s.add(metricChargedTokens, cost.Tokens)
	if p := &r.pc.rules.Pricing; p.Priced() {
		s.add(metricCostNanodollars, cost.USD)
		if _, source, _ := p.PriceOf(r.servedModel(), r.priceProvider()); source.From == config.FromDearest {
			s.count(metricUnlisted)
		}
	}
}

// estimateRatioPercent is reserved as a percentage of charged (both
// positive), rounded to the nearest, at most maxEstimateRatioPercent: 100
// when the reservation was the charge exactly, 250 when it was two and a
// half times it, 50 when half.
func estimateRatioPercent(reserved, charged int64) uint64 {
	ratio := math.Round(float64(reserved) * 100 / float64(charged))
	return uint64(min(ratio, maxEstimateRatioPercent))
}

// countRejection counts a rejection (token_ratelimit_count, the Higress
// counter) of a request for model, and the kind of limit that closed.
func (pc PluginConfig) countRejection(k budget.Kind, model string) {
	s := pc.metrics.seriesOf(requestHeader(consumerHeader), model)
	s.count(metricRejected)
	if int(k) < len(rejectedBy) {
		s.add(rejectedBy[k], 1)
	}
}
