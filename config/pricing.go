package config

import (
	"math"
	"math/bits"
	"regexp"
	"strconv"

	"github.com/tidwall/gjson"
)

// Money. pricing says what each model's tokens cost, in US dollars per
// million tokens; usd_per_* windows limit what a subject spends. Money is
// counted in integers, never in floats: a price is held in picodollars
// (10^-12 USD) per token, exact for prices with up to six decimals, and a
// request's cost and every usd_per_* limit and counter in nanodollars
// (10^-9 USD), each request's cost rounded up. A counter holds at most
// MaxLimit nanodollars, about 9 million dollars; a limit at most
// MaxUSDLimit.

// Units of money.
const (
	PicoPerDollar = 1_000_000_000_000
	NanoPerDollar = 1_000_000_000
	picoPerNano   = 1_000
	// maxPrice bounds a price, in US dollars per million tokens.
	maxPrice = 1_000_000
	// MaxUSDLimit is the largest usd_per_* limit, in US dollars: within
	// MaxLimit nanodollars.
	MaxUSDLimit = 9_000_000
)

// Price is what one token of each kind costs a model, in picodollars.
type Price struct {
	Input      int64 // input tokens not read from or written to a cache
	Output     int64 // output tokens, reasoning included
	CacheRead  int64 // input tokens read from a cache
	CacheWrite int64 // input tokens written to a cache
}

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

// NanoUSD is what a response with these counts costs a model, in
// nanodollars, rounded up; input includes the cache reads and writes, as
// in Cost.Tokens. Each count is taken in [0, estimate.MaxTokens], and the
// cost saturates at MaxLimit: a client's or an upstream's numbers can make
// it neither negative nor inexact (the bound the nanodollars reserved and
// charged keep from here, as Cost.Tokens's tokens). An unpriced model costs 0 (the
// configuration refuses money limits that could meet one).
func (p *Pricing) NanoUSD(input, output, cacheRead, cacheWrite int64, model string) int64 {
	price, ok := p.PriceOf(model)
	if !ok {
		return 0
	}
	input, output = bound(input), bound(output)
	cacheRead, cacheWrite = bound(cacheRead), bound(cacheWrite)
	uncached := max(input-cacheRead-cacheWrite, 0)
	// Up to 4 × 10^15 tokens × 10^12 picodollars: 128 bits.
	var hi, lo uint64
	for _, term := range [...][2]int64{{uncached, price.Input}, {output, price.Output}, {cacheRead, price.CacheRead}, {cacheWrite, price.CacheWrite}} {
		h, l := bits.Mul64(uint64(term[0]), uint64(term[1]))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if hi >= picoPerNano { // the quotient would not fit 64 bits: far past MaxLimit
		return MaxLimit
	}
	q, r := bits.Div64(hi, lo, picoPerNano)
	if r != 0 {
		q++
	}
	return int64(min(q, MaxLimit))
}

// priceFields is the table of a pricing entry.
var priceFields = fields[Price]{
	required(priceField("input", func(p *Price, n int64) { p.Input = n })),
	required(priceField("output", func(p *Price, n int64) { p.Output = n })),
	priceField("cache_read", func(p *Price, n int64) { p.CacheRead = n }),
	priceField("cache_write", func(p *Price, n int64) { p.CacheWrite = n }),
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

// readPrice reads one model's price; cache_read and cache_write default to
// the input price.
func readPrice(path string, v gjson.Result) (Price, error) {
	members, err := readMembers(path, v, priceFields.names(), nil)
	if err != nil {
		return Price{}, err
	}
	price := Price{CacheRead: -1, CacheWrite: -1}
	if err := priceFields.apply(&price, path, members); err != nil {
		return Price{}, err
	}
	if price.CacheRead < 0 {
		price.CacheRead = price.Input
	}
	if price.CacheWrite < 0 {
		price.CacheWrite = price.Input
	}
	return price, nil
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
		p.strictest = Price{max(p.strictest.Input, x.Input), max(p.strictest.Output, x.Output),
			max(p.strictest.CacheRead, x.CacheRead), max(p.strictest.CacheWrite, x.CacheWrite)}
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
