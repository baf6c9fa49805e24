package limiter

import (
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// Money. A request's usage is charged in tokens to token windows and, by
// pricing, in nanodollars to money windows (usd_per_*), in the same calls:
// reserved at admission from its estimate priced, reconciled with what its
// usage costs at the end. See config.Pricing.

// What an admission reserves, and what a request costs, are budget.Amounts
// (tokens in token windows, nanodollars in money windows; Requests unused),
// as costOfUsage prices them: bounded there (config.Cost.Tokens,
// config.Pricing.NanoUSD), trusted from then on.

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
func (r *request) costOfUsage(t pricing.Tokens) budget.Amounts {
	cost := r.costOfUsageAs(r.servedModel(), t)
	for _, m := range r.model.others {
		cost = cost.AtLeast(r.costOfUsageAs(m, t))
	}
	return cost
}

// priceProvider is the provider the request's route serves, which prices
// a model the configuration does not (config.PriceProvider), read once
// for the request.
func (r *request) priceProvider() string {
	m := &r.model
	if !m.providerRead {
		route := m.routeOf(r.pc.rules, r.path)
		m.provider, m.providerRead = config.PriceProvider(route, estimate.RouteDialect(r.path, route.Gemini)), true
	}
	return m.provider
}

// costOfUsageAs is what a request of model that used these tokens costs:
// in tokens (its weights) and, when pricing is set, in nanodollars (its
// price).
func (r *request) costOfUsageAs(model string, t pricing.Tokens) budget.Amounts {
	cost := budget.Amounts{Tokens: r.pc.rules.Cost.Tokens(t.Input, t.Output, t.CacheRead, t.CacheWrite, model)}
	if p := &r.pc.rules.Pricing; p.Priced() {
		cost.USD = p.NanoUSD(t, model, r.priceProvider())
	}
	return cost
}
