package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"time"
)

// The conversion of a model's prices (docs/price-catalog.md says the same
// for users).
//
// Rule 1, units: the database's *_mtok prices are US dollars per million
// tokens, that is picodollars per token × 10^-6. A price is converted from
// its decimal text (big.Rat, exact; never a float multiplication); one
// with more than six decimals is rounded up to the next picodollar. A
// price is in [0, maxPrice].
//
// Rule 2, kinds: the keys of kinds are the token prices of ours, each a
// field of pricing.Price; a kind a model does not give is written Unset,
// which pricing.Price.WithDefaults fills (cache and input media at Input,
// reasoning and output media at Output). A model that gives neither input
// nor output is not listed (unpriced: Lookup stops at it and reports no
// price); one that gives one of them only costs 0 for the other, as the
// database's library charges nothing for a kind it has no price for. The
// keys of ignored are not token prices of ours and are left out; any other
// key fails the generation.
//
// Rule 3, tiers: a tiered price ({base, tiers: [{start, price}]}) prices
// every token of a request by the tier its total input tokens are more
// than (genai-prices' de and he functions: the price of the last tier with
// start < input tokens, else base). One threshold across the model's kinds
// becomes pricing.Price's Long and LongAbove, exactly. Several thresholds
// (several tiers, or kinds whose thresholds differ) become the conservative
// choice: LongAbove the lowest threshold (below it every kind is at its
// base, exactly) and Long each kind's dearest price at any size, so that no
// request is priced below its list price.
//
// Rule 4, conditional prices (a list of prices with constraints, the
// library reading the list from its end): a start_date constraint is in
// force from its date (00:00 UTC); the prices a model has on the
// generation date are the set the library would choose then, and every
// time_of_date set after it in the list (off-peak discounts, or peak
// surcharges, that apply at some hour of that day): the dearest of them,
// kind by kind and tier by tier. Sets that do not price the same kinds fail
// the generation (which default the others would get is not for the
// generator to guess).
//
// Rule 5: deprecated models stay listed (clients still call them).

// kind is a token price of ours: the database's key, and pricing.Price's
// field.
type kind struct{ key, field string }

var kinds = [...]kind{
	{"input_mtok", "Input"},
	{"output_mtok", "Output"},
	{"cache_read_mtok", "CacheRead"},
	{"cache_write_mtok", "CacheWrite"},
	{"output_reasoning_mtok", "Reasoning"},
	{"input_audio_mtok", "InputAudio"},
	{"output_audio_mtok", "OutputAudio"},
	{"input_image_mtok", "InputImage"},
	{"output_image_mtok", "OutputImage"},
}

const (
	kindInput  = 0
	kindOutput = 1
)

// ignored are the database's price keys that are not token prices of ours,
// and what becomes of what they price (docs/price-catalog.md lists them).
var ignored = map[string]string{
	"cache_write_1h_mtok":             "Anthropic's one-hour cache writes: the usage counts cache writes as one kind, priced at cache_write_mtok (the five-minute price)",
	"cache_audio_read_mtok":           "cached audio tokens: priced as cache reads",
	"cache_image_read_mtok":           "cached image tokens: priced as cache reads",
	"input_video_mtok":                "video tokens: the usage does not count them apart, priced as input",
	"output_video_mtok":               "video tokens: the usage does not count them apart, priced as output",
	"output_citation_mtok":            "Perplexity's citation tokens: not counted by the usage",
	"requests_kcount":                 "a price per request",
	"web_searches_kcount":             "a price per web search",
	"storage_searches_kcount":         "a price per file search",
	"input_text_messages_kcount":      "a price per message (voice sessions)",
	"input_document_kpages":           "a price per page (OCR)",
	"input_annotated_document_kpages": "a price per page (OCR)",
	"audio_hours":                     "a price per hour of audio",
	"input_audio_hours":               "a price per hour of audio",
}

// maxPrice bounds a price, in US dollars per million tokens (as a
// configuration's pricing): 10^12 picodollars per token.
const maxPrice = 1_000_000

// maxTier bounds a tier's start, in tokens: pricing.MaxTokens.
const maxTier = 1_000_000_000_000_000

// step is a price as a function of a request's input tokens: base, or the
// price of the last tier whose above the input tokens are more than.
type step struct {
	base  int64
	tiers []tier // by above, increasing, each above once
}

type tier struct{ above, price int64 }

// at is the price of a request with this many input tokens.
func (s *step) at(input int64) int64 {
	p := s.base
	for _, t := range s.tiers {
		if input > t.above {
			p = t.price
		}
	}
	return p
}

// modelPrice is a model's token prices, by kind (nil: not given).
type modelPrice [len(kinds)]*step

// price is a converted price: pricing.Price's fields, in picodollars per
// token, Unset (-1) where not given.
type price struct {
	kinds     [len(kinds)]int64
	long      *price
	longAbove int64
}

const unset = -1

// pico converts a price's decimal text, in US dollars per million tokens,
// to picodollars per token (rule 1).
func pico(text json.Number) (int64, error) {
	r, ok := new(big.Rat).SetString(string(text))
	if !ok {
		return 0, fmt.Errorf("price %q is not a number", text)
	}
	if r.Sign() < 0 || r.Cmp(big.NewRat(maxPrice, 1)) > 0 {
		return 0, fmt.Errorf("price %s is not in [0, %d] US dollars per million tokens", text, maxPrice)
	}
	r.Mul(r, big.NewRat(1_000_000, 1))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	return q.Int64(), nil
}

// readModelPrice reads a ModelPrice: its token prices (rule 2), each a
// number or tiered (rule 3). ignoredSeen counts the ignored keys.
func readModelPrice(raw json.RawMessage, ignoredSeen map[string]int) (modelPrice, error) {
	var mp modelPrice
	var fields map[string]json.RawMessage
	if err := decodeStrict(raw, &fields); err != nil {
		return mp, fmt.Errorf("prices: %w", err)
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		k := slices.IndexFunc(kinds[:], func(k kind) bool { return k.key == key })
		if k < 0 {
			if _, ok := ignored[key]; ok {
				ignoredSeen[key]++
				continue
			}
			return mp, fmt.Errorf("price key %q is neither a token price of ours nor one the generator ignores: add it to kinds or to ignored", key)
		}
		s, err := readStep(fields[key])
		if err != nil {
			return mp, fmt.Errorf("%s: %w", key, err)
		}
		mp[k] = s
	}
	return mp, nil
}

// readStep reads a price: a number, or a TieredPrices.
func readStep(raw json.RawMessage) (*step, error) {
	var n json.Number
	if err := decodeStrict(raw, &n); err == nil {
		p, err := pico(n)
		return &step{base: p}, err
	}
	var t tieredPrice
	if err := decodeStrict(raw, &t); err != nil {
		return nil, fmt.Errorf("neither a number nor tiered prices: %s", raw)
	}
	base, err := pico(t.Base)
	if err != nil {
		return nil, err
	}
	s := &step{base: base}
	for _, tr := range t.Tiers {
		above, err := strconv.ParseInt(string(tr.Start), 10, 64)
		if err != nil || above < 0 || above > maxTier {
			return nil, fmt.Errorf("tier start %s is not a token count in [0, %d]", tr.Start, int64(maxTier))
		}
		p, err := pico(tr.Price)
		if err != nil {
			return nil, err
		}
		s.tiers = append(s.tiers, tier{above, p})
	}
	// As the library's TieredPrices: by start; of equal starts the later wins.
	slices.SortStableFunc(s.tiers, func(a, b tier) int { return cmp.Compare(a.above, b.above) })
	tiers := s.tiers[:0]
	for _, t := range s.tiers {
		if n := len(tiers); n > 0 && tiers[n-1].above == t.above {
			tiers[n-1] = t
			continue
		}
		tiers = append(tiers, t)
	}
	s.tiers = tiers
	return s, nil
}

// readPrices reads a model's prices: a ModelPrice, or conditional prices
// of which the dearest in force on the day (rule 4).
func readPrices(raw json.RawMessage, day time.Time, ignoredSeen map[string]int) (modelPrice, error) {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '[' {
		return readModelPrice(raw, ignoredSeen)
	}
	var list []conditionalPrice
	if err := decodeStrict(raw, &list); err != nil {
		return modelPrice{}, fmt.Errorf("conditional prices: %w", err)
	}
	if len(list) == 0 {
		return modelPrice{}, fmt.Errorf("an empty list of conditional prices")
	}
	// From the list's end, as the library: time_of_date sets apply at some
	// hour; the first set in force on the day (no constraint, or a
	// start_date not after it) ends the search; none: the first set.
	var inForce []json.RawMessage
	chosen := false
	for i := len(list) - 1; i >= 0 && !chosen; i-- {
		c := list[i].Constraint
		switch {
		case c == nil:
			chosen = true
		case c.Type == "time_of_date" || c.Type == "" && c.StartTime != "" && c.EndTime != "" && c.StartDate == "":
			if c.StartTime == "" || c.EndTime == "" || c.StartDate != "" {
				return modelPrice{}, fmt.Errorf("constraint %+v: a time_of_date needs start_time and end_time only", *c)
			}
		case c.Type == "start_date" || c.Type == "" && c.StartDate != "" && c.StartTime == "" && c.EndTime == "":
			from, err := time.Parse(time.DateOnly, c.StartDate)
			if err != nil || c.StartTime != "" || c.EndTime != "" {
				return modelPrice{}, fmt.Errorf("constraint %+v: a start_date needs a date (YYYY-MM-DD) only", *c)
			}
			if from.After(day) {
				continue
			}
			chosen = true
		default:
			return modelPrice{}, fmt.Errorf("constraint %+v: neither a start_date nor a time_of_date", *c)
		}
		inForce = append(inForce, list[i].Prices)
	}
	if !chosen {
		inForce = append(inForce, list[0].Prices)
	}
	var dearest modelPrice
	for i, raw := range inForce {
		mp, err := readModelPrice(raw, ignoredSeen)
		if err != nil {
			return modelPrice{}, err
		}
		if i == 0 {
			dearest = mp
			continue
		}
		for k := range kinds {
			if (dearest[k] == nil) != (mp[k] == nil) {
				return modelPrice{}, fmt.Errorf("conditional prices in force do not all price %s", kinds[k].key)
			}
			if mp[k] != nil {
				dearest[k] = dearer(dearest[k], mp[k])
			}
		}
	}
	return dearest, nil
}

// laterChange is the first start_date after day among a model's
// conditional prices: the day a price it has then changes (ok false: none).
func laterChange(raw json.RawMessage, day time.Time) (first time.Time, ok bool) {
	if raw = bytes.TrimSpace(raw); len(raw) == 0 || raw[0] != '[' {
		return time.Time{}, false
	}
	var list []conditionalPrice
	if decodeStrict(raw, &list) != nil { // readPrices says why
		return time.Time{}, false
	}
	for _, c := range list {
		if c.Constraint == nil || c.Constraint.StartDate == "" {
			continue
		}
		if from, err := time.Parse(time.DateOnly, c.Constraint.StartDate); err == nil && from.After(day) && (!ok || from.Before(first)) {
			first, ok = from, true
		}
	}
	return first, ok
}

// dearer is the larger of two prices at every size of request: a tier at
// each threshold of either.
func dearer(a, b *step) *step {
	s := &step{base: max(a.base, b.base)}
	var aboves []int64
	for _, t := range append(slices.Clone(a.tiers), b.tiers...) {
		aboves = append(aboves, t.above)
	}
	slices.Sort(aboves)
	for _, above := range slices.Compact(aboves) {
		// input > above: the price of a request of above+1 tokens.
		s.tiers = append(s.tiers, tier{above, max(a.at(above+1), b.at(above+1))})
	}
	return s
}

// convert is a model's price as pricing.Price holds it (rules 2 and 3);
// ok is false when the model is not priced in tokens, several reports that
// several thresholds took the conservative choice.
func convert(mp modelPrice) (p price, ok, several bool) {
	if mp[kindInput] == nil && mp[kindOutput] == nil {
		return price{}, false, false
	}
	var aboves []int64
	for _, s := range mp {
		if s != nil {
			for _, t := range s.tiers {
				aboves = append(aboves, t.above)
			}
		}
	}
	slices.Sort(aboves)
	aboves = slices.Compact(aboves)
	p = at(mp, func(s *step) int64 { return s.base })
	switch len(aboves) {
	case 0:
		return p, true, false
	case 1:
		long := at(mp, func(s *step) int64 { return s.at(aboves[0] + 1) })
		p.long, p.longAbove = &long, aboves[0]
		return p, true, false
	}
	long := at(mp, func(s *step) int64 {
		top := s.base
		for _, t := range s.tiers {
			top = max(top, t.price)
		}
		return top
	})
	p.long, p.longAbove = &long, aboves[0]
	return p, true, true
}

// at is the price of every kind by value; a kind not given is Unset, but
// Input and Output, 0 (rule 2).
func at(mp modelPrice, value func(*step) int64) price {
	var p price
	for k, s := range mp {
		switch {
		case s != nil:
			p.kinds[k] = value(s)
		case k == kindInput || k == kindOutput:
			p.kinds[k] = 0
		default:
			p.kinds[k] = unset
		}
	}
	return p
}
