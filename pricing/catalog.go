package pricing

import (
	"regexp"
	"strings"
	"sync"
)

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
	whole := spellings{name: name}
	// The route's provider, then the provider the name names.
	if p, ok := c.byID[provider]; ok {
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
		model := spellings{name: rest}
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
	if p, ok := c.byID[provider]; ok {
		return c.providers[p].id
	}
	return "openai"
}

// Dearest is the largest price of each kind among a provider's models
// (Strictest over them, long-context tiers included); among every model of
// the catalog for a provider the catalog does not have.
func Dearest(provider string) Price {
	c := theCatalog()
	if p, ok := c.byID[provider]; ok {
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

// catalog is the generated data made fast to search, built once, at the
// first call.
type catalog struct {
	providers []providerIndex // catalogProviders' order
	byID      map[string]int
	vendors   map[string]bool // bedrockVendors
	dearest   Price           // of every listed model
}

// providerIndex is a provider made fast to search: a name equal to one of
// a model's equals patterns is found by exact; the other patterns are tried
// in the models' order, up to the model exact found.
type providerIndex struct {
	id        string
	named     compiled
	alias     compiled
	fallbacks []int
	exact     map[string]int32
	patterns  []modelPattern // by model, in order
	models    []Listed
	priced    []bool
	dearest   Price
}

type modelPattern struct {
	model int32
	match compiled
}

// compiled is a match with its regexp compiled, and the bytes a name
// needs to match it (bytesOf): most patterns are ruled out by one AND.
type compiled struct {
	op   matchOp
	need uint64
	text string
	re   *regexp.Regexp
	of   []compiled
}

// found is a model a search found: its provider and index there.
type found struct{ provider, model int }

// spellings are a name as sent and, once a search needs it, with its
// compact dates dashed (the same string when it has none), and the
// providers searched for them.
type spellings struct {
	name, dashed string
	have         uint64 // the name's bytes (bytesOf), once a search needs them
	searched     searched
}

func (s *spellings) dashedName() string {
	if s.dashed == "" {
		s.dashed = dashDates(s.name)
	}
	return s.dashed
}

// searched is a set of providers.
type searched uint64

func (s searched) has(p int) bool { return s&(1<<p) != 0 }

var theCatalog = sync.OnceValue(buildCatalog)

func buildCatalog() *catalog {
	if len(catalogProviders) > 64 {
		panic("pricing: more providers than a search's set holds")
	}
	c := &catalog{byID: make(map[string]int, len(catalogProviders)), vendors: make(map[string]bool, len(bedrockVendors))}
	for _, v := range bedrockVendors {
		c.vendors[v] = true
	}
	for i, p := range catalogProviders {
		c.byID[p.id] = i
	}
	for _, p := range catalogProviders {
		x := providerIndex{
			id:     p.id,
			named:  compile(p.named),
			alias:  compile(p.alias),
			exact:  make(map[string]int32),
			models: make([]Listed, len(p.models)),
			priced: make([]bool, len(p.models)),
		}
		for _, f := range p.fallbacks {
			x.fallbacks = append(x.fallbacks, c.byID[f])
		}
		for i, m := range p.models {
			x.models[i] = Listed{Provider: p.id, Model: m.id, Price: m.price.WithDefaults()}
			x.priced[i] = !m.unpriced
			if !m.unpriced { // prices are not negative: Strictest with the zero Price is the price
				x.dearest = Strictest(x.dearest, x.models[i].Price)
				c.dearest = Strictest(c.dearest, x.models[i].Price)
			}
			// An or's alternatives one by one: its equals go to exact.
			alternatives := []match{m.match}
			if m.match.op == matchOr {
				alternatives = m.match.of
			}
			for _, a := range alternatives {
				if a.op == matchEquals {
					if _, taken := x.exact[a.text]; !taken {
						x.exact[a.text] = int32(i)
					}
					continue
				}
				x.patterns = append(x.patterns, modelPattern{model: int32(i), match: compile(a)})
			}
		}
		c.providers = append(c.providers, x)
	}
	return c
}

func compile(m match) compiled {
	c := compiled{op: m.op, text: m.text}
	for _, o := range m.of {
		c.of = append(c.of, compile(o))
	}
	switch m.op {
	case matchEquals, matchStartsWith, matchEndsWith, matchContains:
		c.need = bytesOf(m.text)
	case matchRegexp:
		c.re = regexp.MustCompile(m.text) // the generator compiled each one
		prefix, _ := c.re.LiteralPrefix() // in every match, so in the name
		c.need = bytesOf(prefix)
	case matchAnd: // every part's
		for _, o := range c.of {
			c.need |= o.need
		}
	case matchOr: // those every part needs
		c.need = ^uint64(0)
		for _, o := range c.of {
			c.need &= o.need
		}
		if len(c.of) == 0 {
			c.need = 0
		}
	}
	return c
}

// bytesOf is the set of a text's bytes, by class: each letter and digit
// its own bit, the punctuation of model names one bit each, any other byte
// one of a few bits. A name without one of a pattern's bytes cannot match
// it.
func bytesOf(text string) uint64 {
	var set uint64
	for i := 0; i < len(text); i++ {
		set |= byteBit[text[i]]
	}
	return set
}

var byteBit = func() (bits [256]uint64) {
	for c := range bits {
		switch {
		case 'a' <= c && c <= 'z':
			bits[c] = 1 << (c - 'a')
		case '0' <= c && c <= '9':
			bits[c] = 1 << (26 + c - '0')
		default:
			switch i := strings.IndexByte("-./:_@", byte(c)); {
			case i >= 0:
				bits[c] = 1 << (36 + i)
			default:
				bits[c] = 1 << (42 + c%22)
			}
		}
	}
	return bits
}()

// matches reports whether the name, whose bytes are have (bytesOf),
// matches.
func (m *compiled) matches(name string, have uint64) bool {
	if m.need&^have != 0 {
		return false
	}
	switch m.op {
	case matchEquals:
		return name == m.text
	case matchStartsWith:
		return strings.HasPrefix(name, m.text)
	case matchEndsWith:
		return strings.HasSuffix(name, m.text)
	case matchContains:
		return strings.Contains(name, m.text)
	case matchRegexp:
		return m.re.MatchString(name)
	case matchAnd:
		for i := range m.of {
			if !m.of[i].matches(name, have) {
				return false
			}
		}
		return true
	case matchOr:
		for i := range m.of {
			if m.of[i].matches(name, have) {
				return true
			}
		}
		return false
	case matchNot:
		return !m.of[0].matches(name, have)
	}
	return false
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

// searchProvider searches a provider's models, then its fallback
// providers', for the name, then for the name with its compact dates
// dashed; the name's searched set gets the providers searched.
func (c *catalog) searchProvider(p int, s *spellings) (found, bool) {
	if s.have == 0 {
		s.have = bytesOf(s.name)
	}
	if f, ok := c.searchWithFallbacks(p, s.name, s.have, s.searched); ok {
		return f, true
	}
	if dashed := s.dashedName(); dashed != s.name {
		// Dashing adds dashes only.
		if f, ok := c.searchWithFallbacks(p, dashed, s.have|byteBit['-'], s.searched); ok {
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
func (c *catalog) searchWithFallbacks(p int, name string, have uint64, searched searched) (found, bool) {
	if m, ok := c.providers[p].search(name, have); ok {
		return found{p, m}, true
	}
	for _, fb := range c.providers[p].fallbacks {
		if searched.has(fb) {
			continue
		}
		if m, ok := c.providers[fb].search(name, have); ok {
			return found{fb, m}, true
		}
	}
	return found{}, false
}

// search is the provider's first model whose pattern matches the name,
// whose bytes are have.
func (p *providerIndex) search(name string, have uint64) (int, bool) {
	limit := int32(len(p.models))
	if i, ok := p.exact[name]; ok {
		limit = i
	}
	for i := range p.patterns {
		pat := &p.patterns[i]
		if pat.model >= limit {
			break
		}
		if pat.match.need&^have == 0 && pat.match.matches(name, have) {
			return int(pat.model), true
		}
	}
	return int(limit), limit < int32(len(p.models))
}

// named is the provider a (normalized) name says: the provider its
// "provider/" prefix names, the Bedrock id's, or the first whose
// model_match matches it.
func (c *catalog) named(name string) (int, bool) {
	if p, _, ok := c.prefixed(name); ok {
		return p, true
	}
	if c.bedrockID(name) {
		if p, ok := c.byID["aws"]; ok {
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
	if p, ok := c.byID[prefix]; ok {
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
