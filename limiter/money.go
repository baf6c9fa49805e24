package limiter

import (
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Money. A request's usage is charged in tokens to token windows and, by
// pricing, in nanodollars to money windows (usd_per_*), in the same calls:
// reserved at admission from its estimate priced, reconciled with what its
// usage costs at the end. See config.Pricing.

// reservation is what an admission reserves, or a request costs: tokens in
// token windows, nanodollars in money windows (Requests unused).
type reservation budget.Amounts

// givenBack is what undoing an admission that reserved r adds: r taken
// back, and one request less.
func (r reservation) givenBack() budget.Amounts {
	return budget.Amounts{Tokens: -r.Tokens, Requests: -1, USD: -r.USD}
}

// atLeast is r, each amount at least other's.
func (r reservation) atLeast(other reservation) reservation {
	return reservation{Tokens: max(r.Tokens, other.Tokens), USD: max(r.USD, other.USD)}
}

// exceeds says whether r is more than a window of kind k can ever hold.
func (r reservation) exceeds(k budget.Kind, limit int64) bool {
	return k == budget.KindTokens && r.Tokens > limit || k == budget.KindUSD && r.USD > limit
}

// quotaValue writes a limit or what is left of it for the quota headers:
// tokens and requests as integers, money in US dollars ("20", "0.5").
func quotaValue(k budget.Kind, n int64) string {
	if k == budget.KindUSD {
		return config.FormatUSD(n)
	}
	return strconv.FormatInt(n, 10)
}

// costOfUsage is what a request that used these tokens costs (its usage,
// or its estimate): in tokens (config.Cost.Tokens) and, when pricing is
// set, in nanodollars, as the most expensive of the models it may name.
func (r *request) costOfUsage(input, output, cacheRead, cacheWrite int64) reservation {
	cost := r.costOfUsageAs(r.servedModel(), input, output, cacheRead, cacheWrite)
	for _, m := range r.model.others {
		cost = cost.atLeast(r.costOfUsageAs(m, input, output, cacheRead, cacheWrite))
	}
	return cost
}

// costOfUsageAs is what a request of model that used these tokens costs:
// in tokens (its weights) and, when pricing is set, in nanodollars (its
// price).
func (r *request) costOfUsageAs(model string, input, output, cacheRead, cacheWrite int64) reservation {
	cost := reservation{Tokens: r.pc.rules.Cost.Tokens(input, output, cacheRead, cacheWrite, model)}
	if p := &r.pc.rules.Pricing; p.Configured() {
		cost.USD = p.NanoUSD(input, output, cacheRead, cacheWrite, model)
	}
	return cost
}
