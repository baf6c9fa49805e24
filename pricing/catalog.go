package pricing

import "strings"

// The catalog: public list prices of the models of the providers the plugin
// parses, generated into catalog_gen.go from a pinned public price database
// (Source; tools/pricecatalog, make prices; the conversion rules are in
// docs/price-catalog.md). The database says which model a name is by
// patterns (a model's match: equals, starts_with, ends_with, contains, a
// regexp, and, or), tried against the lowercased name, the first matching
// model of a provider winning; Lookup searches as the database's own
// library does, providers in catalogProviders' order.

// Listed is a model the catalog prices.
type Listed struct {
	Provider string // the database's provider id: "openai", "anthropic", "google", "aws", ...
	Model    string // the database's model id: "gpt-4o", "claude-sonnet-4-5", ...
	Price    Price  // its list price, every kind set (WithDefaults)
}

// Lookup finds a model's list price. provider is what the route says (""
// when it says nothing: an OpenAI-shaped path; "anthropic" for Anthropic
// Messages, "google" for Gemini/Vertex paths, "aws" for Bedrock paths,
// "azure" for Azure OpenAI deployments): that provider's models (and its
// fallback providers') are searched first, then the provider the name names
// (ProviderOf's first step), then, for a "provider/model" name (LiteLLM's
// spelling) whose prefix names a provider, the model in that provider (and
// in the one the model's name names), then every provider in the catalog's
// order. In each provider the name is tried as sent, then with a compact
// date suffix spelled with dashes ("-20240806" as "-2024-08-06"), as the
// database's own library does. Case and surrounding spaces do not matter.
//
// A name the database knows but does not price in tokens (priced per
// request, page or hour of audio, or free) is not listed: Lookup reports
// false for it rather than the price of a later, different model.
//
// Lookup allocates nothing for a lowercase name; it copies the name once
// when it has capitals, or a compact date that the name as sent does not
// match.
func Lookup(model, provider string) (Listed, bool) {
	c := theCatalog()
	name := normalize(model)
	if name == "" {
		return Listed{}, false
	}
	whole := spellings{asSent: c.spell(name)}
	// The route's provider, then the provider the name names.
	if p, ok := c.provider(provider); ok {
		if f, found := c.searchProvider(p, &whole); found {
			return c.listed(f)
		}
	}
	if p, ok := c.named(name); ok && !whole.searched.has(p) {
		if f, found := c.searchProvider(p, &whole); found {
			return c.listed(f)
		}
	}
	// A "provider/model" name: the model in the provider its prefix names.
	if q, rest, ok := c.prefixed(name); ok {
		model := spellings{asSent: c.spell(rest)}
		if f, found := c.searchProvider(q, &model); found {
			return c.listed(f)
		}
		if p, ok := c.named(rest); ok && !model.searched.has(p) {
			if f, found := c.searchProvider(p, &model); found {
				return c.listed(f)
			}
		}
	}
	// Every provider.
	for p := range c.providers {
		if !whole.searched.has(p) {
			if f, found := c.searchProvider(p, &whole); found {
				return c.listed(f)
			}
		}
	}
	return Listed{}, false
}

// ProviderOf is the provider a model belongs to when the catalog does not
// list it: the one its name says (a "provider/model" prefix naming one, a
// Bedrock id's vendor prefix → "aws", else the database's model_match of
// the first provider whose pattern matches, e.g. "claude" → "anthropic"),
// else the route's provider (a provider id of the catalog), else "openai"
// (an OpenAI-shaped path).
func ProviderOf(model, provider string) string {
	c := theCatalog()
	if p, ok := c.named(normalize(model)); ok {
		return c.providers[p].id
	}
	if p, ok := c.provider(provider); ok {
		return c.providers[p].id
	}
	return "openai"
}

// Ready builds the catalog's index, which is otherwise built on first use
// (about 15 ms in WASM, 580 KB of heap): a configuration that will price
// requests calls it as it loads, so that no request waits for it.
func Ready() { theCatalog() }

// Dearest is the largest price of each kind among a provider's models
// (Strictest over them, long-context tiers included); among every model of
// the catalog for a provider the catalog does not have.
func Dearest(provider string) Price {
	c := theCatalog()
	if p, ok := c.provider(provider); ok {
		return c.providers[p].dearest
	}
	return c.dearest
}

// match is a pattern of the database (a model's match, a provider's
// model_match or provider_match), its texts lowercased by the generator.
type match struct {
	op   matchOp
	text string  // equals, starts_with, ends_with, contains: the text; regexp: the pattern (RE2)
	of   []match // and, or, not (one)
}

type matchOp uint8

const (
	matchNone matchOp = iota // no pattern: matches nothing
	matchEquals
	matchStartsWith
	matchEndsWith
	matchContains
	matchRegexp
	matchAnd
	matchOr
	matchNot // the rewrite of a lookahead RE2 does not have: of[0] does not match
)

// catalogProvider is a provider of the database, as generated.
type catalogProvider struct {
	id        string
	named     match    // model_match: the model names that say this provider
	alias     match    // provider_match: the names of this provider ("xai" for x-ai)
	fallbacks []string // fallback_model_providers: searched after its own models
	models    []catalogModel
}

// catalogModel is a model of the database, as generated.
type catalogModel struct {
	id       string
	match    match
	price    Price // kinds the database does not give are Unset
	unpriced bool  // priced in no token kind of ours: not listed
}

// normalize is the name as the database's patterns see it: lowercased, its
// surrounding spaces trimmed.
func normalize(model string) string {
	name := strings.TrimSpace(model)
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}

// listed is the price of the model a search found, when it has one.
func (c *catalog) listed(f found) (Listed, bool) {
	p := &c.providers[f.provider]
	if !p.priced[f.model] {
		return Listed{}, false
	}
	return p.models[f.model], true
}

// found is a model a search found: its provider and index there.
type found struct{ provider, model int }

// spelling is a name, its bytes (bytesOf) and the models whose equals
// patterns it is.
type spelling struct {
	name  string
	have  uint64
	exact []exactHit
}

func (c *catalog) spell(name string) spelling {
	return spelling{name: name, have: bytesOf(name), exact: c.exact[name]}
}

// spellings are a name as sent and, once a search needs it, with its
// compact dates dashed (no name when it has none), and the providers
// searched for them.
type spellings struct {
	asSent, dashed spelling
	dashedDone     bool
	searched       searched
}

// searched is a set of providers.
type searched uint64

func (s searched) has(p int) bool { return s&(1<<p) != 0 }

// searchProvider searches a provider's models, then its fallback
// providers', for the name, then for the name with its compact dates
// dashed; the name's searched set gets the providers searched.
func (c *catalog) searchProvider(p int, s *spellings) (found, bool) {
	if f, ok := c.searchWithFallbacks(p, &s.asSent, s.searched); ok {
		return f, true
	}
	if !s.dashedDone {
		if dashed := dashDates(s.asSent.name); dashed != s.asSent.name {
			s.dashed = c.spell(dashed)
		}
		s.dashedDone = true
	}
	if s.dashed.name != "" {
		if f, ok := c.searchWithFallbacks(p, &s.dashed, s.searched); ok {
			return f, true
		}
	}
	s.searched |= 1 << p
	for _, fb := range c.providers[p].fallbacks {
		s.searched |= 1 << fb
	}
	return found{}, false
}

// searchWithFallbacks is the database's own search: the provider's first
// matching model, else its fallback providers' (their own models only),
// but those already searched for both spellings.
func (c *catalog) searchWithFallbacks(p int, s *spelling, searched searched) (found, bool) {
	if m, ok := c.search(p, s); ok {
		return found{p, m}, true
	}
	for _, fb := range c.providers[p].fallbacks {
		if searched.has(fb) {
			continue
		}
		if m, ok := c.search(fb, s); ok {
			return found{fb, m}, true
		}
	}
	return found{}, false
}

// search is a provider's first model whose pattern matches the name.
func (c *catalog) search(p int, s *spelling) (int, bool) {
	x := &c.providers[p]
	limit := int32(len(x.models))
	for _, h := range s.exact {
		if h.provider == int32(p) {
			limit = h.model
			break
		}
	}
	for i := range x.patterns {
		pat := &x.patterns[i]
		if pat.model >= limit {
			break
		}
		if pat.match.need&^s.have == 0 && pat.match.matches(s.name, s.have) {
			return int(pat.model), true
		}
	}
	return int(limit), limit < int32(len(x.models))
}

// named is the provider a (normalized) name says: the provider its
// "provider/" prefix names, the Bedrock id's, or the first whose
// model_match matches it.
func (c *catalog) named(name string) (int, bool) {
	if p, _, ok := c.prefixed(name); ok {
		return p, true
	}
	if c.bedrockID(name) {
		if p, ok := c.provider("aws"); ok {
			return p, true
		}
	}
	have := bytesOf(name)
	for p := range c.providers {
		if c.providers[p].named.matches(name, have) {
			return p, true
		}
	}
	return 0, false
}

// prefixed splits a "provider/model" name whose prefix names a provider of
// the catalog, by its id or its provider_match ("xai", "vertex_ai",
// "bedrock", "together_ai").
func (c *catalog) prefixed(name string) (provider int, rest string, ok bool) {
	slash := strings.IndexByte(name, '/')
	if slash <= 0 || slash == len(name)-1 {
		return 0, "", false
	}
	prefix, rest := name[:slash], name[slash+1:]
	if p, ok := c.provider(prefix); ok {
		return p, rest, true
	}
	for p := range c.providers {
		if c.providers[p].alias.matches(prefix, bytesOf(prefix)) {
			return p, rest, true
		}
	}
	return 0, "", false
}

// bedrockID reports whether a name is a Bedrock model id: a vendor's
// ("anthropic.claude-…", "meta.llama3-…", "amazon.nova-…"), or a
// cross-region inference profile's, the vendor's after a region
// ("us.anthropic.claude-…", "apac.…", "us-gov.…", "global.…").
func (c *catalog) bedrockID(name string) bool {
	first, rest, ok := strings.Cut(name, ".")
	if !ok {
		return false
	}
	if c.vendors[first] {
		return true
	}
	for i := 0; i < len(first); i++ {
		if ch := first[i]; (ch < 'a' || ch > 'z') && ch != '-' {
			return false
		}
	}
	second, _, ok := strings.Cut(rest, ".")
	return ok && c.vendors[second]
}

// dashDates is the name with each compact date suffix ("-20240806" before
// "-", ":" or the end) spelled with dashes ("-2024-08-06"), as the
// database's library retries a name; the name itself when it has none.
func dashDates(name string) string {
	var b []byte
	last := 0
	for i := 0; i+9 <= len(name); i++ {
		if name[i] != '-' || !compactDate(name[i+1:i+9]) || i+9 < len(name) && !strings.ContainsRune("-:", rune(name[i+9])) {
			continue
		}
		if b == nil {
			b = make([]byte, 0, len(name)+4)
		}
		d := name[i+1 : i+9]
		b = append(append(append(append(append(append(b, name[last:i]...), '-'), d[:4]...), '-'), d[4:6]...), '-')
		b = append(b, d[6:]...)
		last = i + 9
		i += 8
	}
	if b == nil {
		return name
	}
	return string(append(b, name[last:]...))
}

// compactDate reports whether eight bytes are a date of 20xx, YYYYMMDD,
// that the calendar has.
func compactDate(d string) bool {
	for i := 0; i < 8; i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	if d[0] != '2' || d[1] != '0' {
		return false
	}
	year := int(d[0]-'0')*1000 + int(d[1]-'0')*100 + int(d[2]-'0')*10 + int(d[3]-'0')
	month := int(d[4]-'0')*10 + int(d[5]-'0')
	day := int(d[6]-'0')*10 + int(d[7]-'0')
	days := [13]int{0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days[2] = 29
	}
	return month >= 1 && month <= 12 && day >= 1 && day <= days[month]
}
