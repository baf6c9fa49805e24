package config

import (
	"math"
	"regexp"
	"strconv"

	"github.com/tidwall/gjson"
	"github.com/tokenlimit/ai-token-ratelimit/pricing"
)

// Money. pricing says what each model's tokens cost, in US dollars per
// million tokens; usd_per_* windows limit what a subject spends. Money is
// counted in integers, never in floats (see package pricing): a price in
// picodollars per token, a request's cost and every usd_per_* limit and
// counter in nanodollars, each request's cost rounded up. A counter holds
// at most MaxLimit nanodollars, about 9 million dollars; a limit at most
// MaxUSDLimit.

// Units of money.
const (
	PicoPerDollar = pricing.PicoPerDollar
	NanoPerDollar = pricing.NanoPerDollar
	// maxPrice bounds a price, in US dollars per million tokens.
	maxPrice = 1_000_000
	// MaxUSDLimit is the largest usd_per_* limit, in US dollars: within
	// MaxLimit nanodollars.
	MaxUSDLimit = 9_000_000
)

// Price is what one token of each kind costs a model, in picodollars.
type Price = pricing.Price

// PriceRule is an entry of pricing: the price of the models its key
// matches (a name, "<prefix>*" or "regexp:<re>", as token_weights.models).
type PriceRule struct {
	Key    string // as configured
	Kind   ModelKind
	Name   string         // ModelExact: the name; ModelPrefix: the prefix
	Regexp *regexp.Regexp // ModelRegexp
	Price  Price
}

// Pricing is pricing: the price of each model.
type Pricing struct {
	Rules []PriceRule // in configuration order, "*" excluded
	Any   *Price      // "*": every model no rule matches, and a request naming none; nil when not set

	index     modelIndex[Price]
	strictest Price // the largest price of each kind, of UnknownModel
}

// Configured reports whether pricing has any price.
func (p *Pricing) Configured() bool { return len(p.Rules) > 0 || p.Any != nil }

// PriceOf returns the price of a model: its rule's (see modelIndex), else
// "*"'s; ok is false when neither prices it. UnknownModel costs the largest
// price of each kind.
func (p *Pricing) PriceOf(model string) (Price, bool) {
	if model == UnknownModel && p.Configured() {
		return p.strictest, true
	}
	if v, ok := p.index.lookup(model); ok {
		return v, true
	}
	if p.Any != nil {
		return *p.Any, true
	}
	return Price{}, false
}

// NanoUSD is what a response with these tokens costs a model, in
// nanodollars, rounded up (pricing.Price.NanoUSD: each count bounded, each
// part within its whole), at most MaxLimit: a client's or an upstream's
// numbers can make it neither negative nor inexact (the bound the
// nanodollars reserved and charged keep from here, as Cost.Tokens's
// tokens). An unpriced model costs 0 (the configuration refuses money
// limits that could meet one).
func (p *Pricing) NanoUSD(t pricing.Tokens, model string) int64 {
	price, ok := p.PriceOf(model)
	if !ok {
		return 0
	}
	return min(price.NanoUSD(t), MaxLimit)
}

// priceFields is the table of a pricing entry.
var priceFields = fields[Price]{
	required(priceField("input", func(p *Price, n int64) { p.Input = n })),
	required(priceField("output", func(p *Price, n int64) { p.Output = n })),
	priceField("cache_read", func(p *Price, n int64) { p.CacheRead = n }),
	priceField("cache_write", func(p *Price, n int64) { p.CacheWrite = n }),
	priceField("reasoning", func(p *Price, n int64) { p.Reasoning = n }),
	priceField("input_audio", func(p *Price, n int64) { p.InputAudio = n }),
	priceField("output_audio", func(p *Price, n int64) { p.OutputAudio = n }),
	priceField("input_image", func(p *Price, n int64) { p.InputImage = n }),
	priceField("output_image", func(p *Price, n int64) { p.OutputImage = n }),
}

// priceField is a price: US dollars per million tokens, a number in [0,
// maxPrice], held in picodollars per token (rounded to the picodollar).
func priceField(name string, set func(*Price, int64)) field[Price] {
	return valueField(name, func(path string, v gjson.Result) (int64, error) {
		f, err := readNumber(path, v, 0, maxPrice)
		return int64(math.Round(f * PicoPerDollar / 1_000_000)), err
	}, set)
}

// readPricing reads pricing: prices by model name, prefix or regexp, and
// "*" for every other model.
func readPricing(c *Config, path string, v gjson.Result) error {
	p := &c.Pricing
	err := readModelKeyed(path, "", v, true, func(rule ModelRule, at string, mv gjson.Result) error {
		price, err := readPrice(at, mv)
		switch {
		case err != nil:
			return err
		case rule.Key == AnyKey:
			p.Any = &price
		default:
			p.Rules = append(p.Rules, PriceRule{Key: rule.Key, Kind: rule.Kind, Name: rule.Name, Regexp: rule.Regexp, Price: price})
		}
		return nil
	})
	if err == nil {
		p.indexPrices()
	}
	return err
}

// readPrice reads one model's price; a kind it does not give costs what
// its input or output costs (pricing.Price.WithDefaults).
func readPrice(path string, v gjson.Result) (Price, error) {
	members, err := readMembers(path, v, priceFields.names(), nil)
	if err != nil {
		return Price{}, err
	}
	u := pricing.Unset
	price := Price{CacheRead: u, CacheWrite: u, Reasoning: u, InputAudio: u, OutputAudio: u, InputImage: u, OutputImage: u}
	if err := priceFields.apply(&price, path, members); err != nil {
		return Price{}, err
	}
	return price.WithDefaults(), nil
}

// indexPrices builds the index PriceOf looks models up in, and the
// largest price of each kind.
func (p *Pricing) indexPrices() {
	p.index = modelIndex[Price]{}
	var all []Price
	if p.Any != nil {
		all = append(all, *p.Any)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		p.index.add(r.Kind, r.Name, r.Regexp, r.Price)
		all = append(all, r.Price)
	}
	p.index.build()
	for _, x := range all {
		p.strictest = pricing.Strictest(p.strictest, x)
	}
}

// PricesByModel reports whether what a request costs in money depends on
// its model: some usd_per_* limit, and a price for some model but "*". The
// plugin then reads the model before admission, as for per-model weights.
func (c *Config) PricesByModel() bool {
	if len(c.Pricing.Rules) == 0 {
		return false
	}
	money := false
	c.eachLimitKey(func(_ string, k *LimitKey, _ string) bool {
		for _, w := range k.Windows {
			money = money || w.Unit == UnitUSD
		}
		return !money
	})
	return money
}

// checkPricing refuses money limits that could meet a model without a
// price: a usd_per_* window needs pricing, and a "*" price unless it is in
// a per_model entry for one exact model, which must then be priced.
func (c *Config) checkPricing() error {
	var err error
	c.eachLimitKey(func(path string, k *LimitKey, perModelExact string) bool {
		for _, w := range k.Windows {
			if w.Unit != UnitUSD {
				continue
			}
			switch {
			case !c.Pricing.Configured():
				err = fieldErr(path+"."+w.Field, "counts money: set pricing, the price of each model in US dollars per million tokens")
			case perModelExact != "":
				if _, ok := c.Pricing.PriceOf(perModelExact); !ok {
					err = fieldErr("pricing", "no price for model ", quote(perModelExact), ", which ", path, ".", w.Field, " counts in dollars")
				}
			case c.Pricing.Any == nil:
				err = fieldErr("pricing", `no price for the models no entry names: add a "*" entry, since `, path, ".", w.Field,
					" counts every model's requests in dollars")
			}
			return err == nil
		}
		return true
	})
	return err
}

// eachLimitKey calls f with every limit key and per_model entry of the
// configuration and its path, and for a per_model entry whose pattern is
// one exact model name that name; it stops when f returns false.
func (c *Config) eachLimitKey(f func(path string, k *LimitKey, perModelExact string) bool) {
	visit := func(path string, k *LimitKey) bool {
		if !f(path, k, "") {
			return false
		}
		for i := range k.PerModel {
			e := &k.PerModel[i]
			exact := ""
			if e.Kind == KeyExact {
				exact = e.Key
			}
			if !f(index(path+"."+perModelField, i), e, exact) {
				return false
			}
		}
		return true
	}
	if c.Global != nil && !visit(globalField, c.Global) || c.Unmatched != nil && !visit(unmatchedField, c.Unmatched) {
		return
	}
	for i := range c.Items {
		for j := range c.Items[i].Keys {
			if !visit(index(index(itemsField, i)+"."+limitKeysField, j), &c.Items[i].Keys[j]) {
				return
			}
		}
	}
}

// FormatUSD writes nanodollars as US dollars, with as many decimals as
// they need (at most nine): 20, 0.5, 0.000001234.
func FormatUSD(nano int64) string {
	sign := ""
	if nano < 0 {
		sign, nano = "-", -nano
	}
	s := strconv.FormatInt(nano/NanoPerDollar, 10)
	if frac := nano % NanoPerDollar; frac != 0 {
		f := strconv.FormatInt(frac+NanoPerDollar, 10)[1:] // nine digits
		for f[len(f)-1] == '0' {
			f = f[:len(f)-1]
		}
		s += "." + f
	}
	return sign + s
}
