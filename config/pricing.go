package config

import (
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
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

// Pricing is pricing and pricing_catalog: the price of each model.
type Pricing struct {
	Rules []PriceRule // in configuration order, "*" excluded
	Any   *Price      // "*": every model no rule matches, and a request naming none; nil when not set
	// Catalog is pricing_catalog: models no rule names are priced at the
	// list prices of package pricing's catalog (on unless turned off).
	Catalog bool
	// Money says the configuration counts money (some usd_per_* window):
	// requests are then priced, the catalog used if it is on.
	Money bool

	index     modelIndex[int] // the Rules, by model
	strictest Price           // the largest price of each kind of the rules and "*"
	listed    *listedMemo     // the catalog's answers, by provider and model
}

// PriceFrom says where a model's price comes from.
type PriceFrom uint8

const (
	FromEntry     PriceFrom = iota + 1 // a pricing entry that names the model (Key)
	FromCatalog                        // the catalog lists it (Provider, Model)
	FromAny                            // pricing's "*"
	FromDearest                        // no one lists it: its provider's dearest catalog price (Provider)
	FromStrictest                      // a route whose model cannot be told: the dearest price it could have
)

// PriceSource is where a model's price comes from, for atrl and the quota
// answer to say, and for the metric of models priced at their provider's
// dearest.
type PriceSource struct {
	From     PriceFrom
	Key      string // FromEntry: the entry's key as configured
	Provider string // FromCatalog, FromDearest, FromStrictest with the catalog: the catalog's provider
	Model    string // FromCatalog: the catalog's model
}

// String says where a price comes from in a few words.
func (s PriceSource) String() string {
	switch s.From {
	case FromEntry:
		return "pricing: " + quote(s.Key)
	case FromCatalog:
		return "the catalog: " + s.Provider + "'s " + s.Model + " (" + pricing.Source + ")"
	case FromAny:
		return `pricing: "*"`
	case FromDearest:
		return "not listed: the dearest price of " + s.Provider + " in the catalog (" + pricing.Source + ")"
	case FromStrictest:
		if s.Provider != "" {
			return "a model the route does not name: the dearest of each kind, of pricing and of " + s.Provider + " in the catalog"
		}
		return "a model the route does not name: the dearest of each kind in pricing"
	}
	return "no price"
}

// Priced reports whether requests are priced: the configuration counts
// money, or pricing gives prices (which the spend metrics then count).
func (p *Pricing) Priced() bool { return p.Money || len(p.Rules) > 0 || p.Any != nil }

// PriceOf returns the price of a model, served on a route of provider (see
// PriceProvider), and where it comes from: its entry's (see modelIndex),
// else the catalog's (when on), else "*"'s, else its provider's dearest
// catalog price; ok is false when none of them prices it (the catalog is
// off, or requests are not priced). UnknownModel, a route's model the
// plugin cannot name, costs the largest price of each kind of every
// entry and of its provider in the catalog.
func (p *Pricing) PriceOf(model, provider string) (Price, PriceSource, bool) {
	catalog := p.Catalog && p.Priced()
	if model == UnknownModel && p.Priced() {
		if !catalog {
			return p.strictest, PriceSource{From: FromStrictest}, true
		}
		provider = pricing.ProviderOf("", provider)
		return pricing.Strictest(p.strictest, pricing.Dearest(provider)), PriceSource{From: FromStrictest, Provider: provider}, true
	}
	if i, ok := p.index.lookup(model); ok {
		return p.Rules[i].Price, PriceSource{From: FromEntry, Key: p.Rules[i].Key}, true
	}
	if catalog {
		if l, ok := p.listed.lookup(model, provider); ok {
			return l.Price, PriceSource{From: FromCatalog, Provider: l.Provider, Model: l.Model}, true
		}
	}
	if p.Any != nil {
		return *p.Any, PriceSource{From: FromAny}, true
	}
	if catalog {
		provider = pricing.ProviderOf(model, provider)
		return pricing.Dearest(provider), PriceSource{From: FromDearest, Provider: provider}, true
	}
	return Price{}, PriceSource{}, false
}

// NanoUSD is what a response with these tokens costs a model served on a
// route of provider, in nanodollars, rounded up (pricing.Price.NanoUSD:
// each count bounded), at most MaxLimit: a client's or an upstream's
// numbers can make it neither negative nor inexact (the bound the
// nanodollars reserved and charged keep from here, as Cost.Tokens's
// tokens). An unpriced model costs 0 (the configuration refuses money
// limits that could meet one).
func (p *Pricing) NanoUSD(t pricing.Tokens, model, provider string) int64 {
	price, _, ok := p.PriceOf(model, provider)
	if !ok {
		return 0
	}
	return min(price.NanoUSD(t), MaxLimit)
}

// PriceProvider is the provider, as the catalog names providers, that a
// route of this API serves: Google for Gemini and Vertex AI paths, AWS for
// Bedrock's, Azure for Azure OpenAI deployments, Anthropic for Anthropic
// Messages; "" for an OpenAI-shaped path, which any provider may serve.
func PriceProvider(r Route, api estimate.Dialect) string {
	switch {
	case r.Provider != "":
		return r.Provider
	case api == estimate.DialectAnthropic:
		return "anthropic"
	case api == estimate.DialectGemini:
		return "google"
	}
	return ""
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

// readPricingCatalog reads pricing_catalog: on (the default) or off; true
// and false too, as YAML 1.1 tools write on and off.
func readPricingCatalog(c *Config, path string, v gjson.Result) error {
	switch {
	case v.Type == gjson.True, v.Type == gjson.String && v.Str == "on":
		c.Pricing.Catalog = true
	case v.Type == gjson.False, v.Type == gjson.String && v.Str == "off":
		c.Pricing.Catalog = false
	default:
		return fieldErr(path, "must be on or off, got ", describe(v))
	}
	return nil
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
	p.index = modelIndex[int]{}
	var all []Price
	if p.Any != nil {
		all = append(all, *p.Any)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		p.index.add(r.Kind, r.Name, r.Regexp, i)
		all = append(all, r.Price)
	}
	p.index.build()
	for _, x := range all {
		p.strictest = pricing.Strictest(p.strictest, x)
	}
}

// PricesByModel reports whether what a request costs in money depends on
// its model: the configuration counts money, and prices some model apart
// from the others (an entry but "*", or the catalog). The plugin then reads
// the model before admission, as for per-model weights.
func (c *Config) PricesByModel() bool {
	return c.Pricing.Money && (len(c.Pricing.Rules) > 0 || c.Pricing.Catalog)
}

// countsMoney reports whether some usd_per_* window counts money.
func (c *Config) countsMoney() bool {
	money := false
	c.eachLimitKey(func(_ string, k *LimitKey, _ string) bool {
		for _, w := range k.Windows {
			money = money || w.Unit == UnitUSD
		}
		return !money
	})
	return money
}

// checkPricing notes whether the configuration counts money and, with the
// catalog off, refuses money limits that could meet a model without a
// price: a usd_per_* window needs pricing, and a "*" price unless it is in
// a per_model entry for one exact model, which must then be priced. With
// the catalog on, every model has a price.
func (c *Config) checkPricing() error {
	c.Pricing.Money = c.countsMoney()
	if c.Pricing.Catalog {
		c.Pricing.listed = newListedMemo()
		if c.Pricing.Priced() {
			pricing.Ready()
		}
		return nil
	}
	var err error
	c.eachLimitKey(func(path string, k *LimitKey, perModelExact string) bool {
		for _, w := range k.Windows {
			if w.Unit != UnitUSD {
				continue
			}
			switch {
			case len(c.Pricing.Rules) == 0 && c.Pricing.Any == nil:
				err = fieldErr(path+"."+w.Field, "counts money: set pricing, the price of each model in US dollars per million tokens (pricing_catalog is off)")
			case perModelExact != "":
				if _, _, ok := c.Pricing.PriceOf(perModelExact, ""); !ok {
					err = fieldErr("pricing", "no price for model ", quote(perModelExact), ", which ", path, ".", w.Field, " counts in dollars")
				}
			case c.Pricing.Any == nil:
				err = fieldErr("pricing", `no price for the models no entry names: add a "*" entry, since `, path, ".", w.Field,
					" counts every model's requests in dollars (pricing_catalog is off)")
			}
			return err == nil
		}
		return true
	})
	return err
}

// PricingNotes are lines about prices worth logging when the plugin starts
// (and atrl check prints): where the prices of the models no entry names
// come from, and whether the catalog has outlived a price change it knows
// of.
func (c *Config) PricingNotes() []string { return c.pricingNotes(time.Now(), pricing.PricesChange) }

// pricingNotes are PricingNotes on the day now, for a catalog whose prices
// change on change ("": never).
func (c *Config) pricingNotes(now time.Time, change string) []string {
	p := &c.Pricing
	if !p.Money || !p.Catalog {
		return nil
	}
	note := "pricing: models no pricing entry names are priced at their list price in the catalog (" + pricing.Source + ")"
	if p.Any != nil {
		note += `; models it does not list either, at pricing's "*"`
	} else {
		note += `; a model it does not list either is charged its provider's dearest price (token_ratelimit_unlisted_model_count counts them): add a "*" entry to price them yourself`
	}
	notes := []string{note}
	if change != "" && now.UTC().Format(time.DateOnly) >= change {
		notes = append(notes, "pricing: the catalog is out of date: prices it lists changed on "+change+
			" and it still charges the old ones (a plugin built after make prices knows the new ones; pricing entries override any)")
	}
	return notes
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

// NamedModels are the model names the configuration writes out (exact
// per_model entries and limit_by_model keys, pricing entries, the models
// of model_fallbacks), sorted, each once: the models worth showing the
// price of (atrl check).
func (c *Config) NamedModels() []string {
	seen := map[string]bool{}
	c.eachLimitKey(func(_ string, _ *LimitKey, perModelExact string) bool {
		seen[perModelExact] = true
		return true
	})
	for _, item := range c.Items {
		if item.Type == ByModel || item.Type == ByPerModel {
			for _, k := range item.Keys {
				if k.Kind == KeyExact {
					seen[k.Key] = true
				}
			}
		}
	}
	for _, r := range c.Pricing.Rules {
		if r.Kind == ModelExact {
			seen[r.Name] = true
		}
	}
	for _, f := range c.Fallbacks {
		if f.Kind == ModelExact {
			seen[f.Name] = true
		}
		for _, m := range f.Models {
			seen[m] = true
		}
	}
	delete(seen, "")
	return slices.Sorted(maps.Keys(seen))
}

// listedMemo keeps the catalog's answers (pricing.Lookup) for the models
// requests name, by the provider of their route: a model's first request
// searches the catalog, the next ones read a map. It keeps at most
// maxListedMemo answers, so that clients naming ever new models cannot
// grow it (a name past it is searched each time). Safe for concurrent use.
type listedMemo struct {
	mu      sync.Mutex
	answers map[string]map[string]listedAnswer // by provider, then model
	n       int
}

type listedAnswer struct {
	listed pricing.Listed
	ok     bool
}

const maxListedMemo = 4096

func newListedMemo() *listedMemo {
	return &listedMemo{answers: map[string]map[string]listedAnswer{}}
}

func (m *listedMemo) lookup(model, provider string) (pricing.Listed, bool) {
	if m == nil { // a Pricing not made by Parse
		return pricing.Lookup(model, provider)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.answers[provider][model]; ok {
		return a.listed, a.ok
	}
	l, ok := pricing.Lookup(model, provider)
	if m.n < maxListedMemo {
		byModel := m.answers[provider]
		if byModel == nil {
			byModel = map[string]listedAnswer{}
			m.answers[provider] = byModel
		}
		byModel[strings.Clone(model)] = listedAnswer{l, ok} // the name may be a view of a request's bytes
		m.n++
	}
	return l, ok
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
