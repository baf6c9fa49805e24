package pricing

import (
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
)

// The catalog's index: the generated data made fast to search, built once,
// at the first call (about a millisecond natively; a plugin that never
// looks a price up never builds it). Lookup runs on requests, and in WASM
// every map lookup, regexp and pattern counts: a name is looked up once in
// one map of every equals pattern; the other patterns are ruled out by the
// bytes they need (bytesOf), a regexp by the bytes it can begin with, and
// a regexp runs only when nothing cheaper decided.

// catalog is the index.
type catalog struct {
	providers []providerIndex // catalogProviders' order
	exact     map[string][]exactHit
	vendors   map[string]bool // bedrockVendors
	dearest   Price           // of every listed model
}

// exactHit is the first model of a provider whose equals pattern is a name.
type exactHit struct{ provider, model int32 }

// providerIndex is a provider made fast to search: a name equal to one of
// a model's equals patterns is found by the catalog's exact; the other
// patterns are tried in the models' order, up to the model exact found.
type providerIndex struct {
	id        string
	named     compiled
	alias     compiled
	fallbacks []int
	patterns  []modelPattern // by model, in order
	models    []Listed
	priced    []bool
	dearest   Price
}

type modelPattern struct {
	model int32
	match compiled
}

// compiled is a match made fast to try: the bytes a name needs to match it
// (bytesOf), a regexp compiled with the bytes its matches can begin with,
// an and's parts cheapest first.
type compiled struct {
	op    matchOp
	need  uint64
	text  string
	re    *regexp.Regexp
	first *[4]uint64 // a ^-anchored regexp's first bytes; nil: any
	of    []compiled
}

var (
	catalogOnce sync.Once
	theIndex    *catalog
)

func theCatalog() *catalog {
	catalogOnce.Do(func() { theIndex = buildCatalog() })
	return theIndex
}

func buildCatalog() *catalog {
	if len(catalogProviders) > 64 {
		panic("pricing: more providers than a search's set holds")
	}
	c := &catalog{exact: map[string][]exactHit{}, vendors: make(map[string]bool, len(bedrockVendors))}
	b := builder{regexps: map[string]compiled{}}
	for _, v := range bedrockVendors {
		c.vendors[v] = true
	}
	for _, p := range catalogProviders {
		c.providers = append(c.providers, providerIndex{id: p.id})
	}
	for pi, p := range catalogProviders {
		x := &c.providers[pi]
		x.named, x.alias = b.compile(p.named), b.compile(p.alias)
		x.models, x.priced = make([]Listed, len(p.models)), make([]bool, len(p.models))
		for _, f := range p.fallbacks {
			fb, _ := c.provider(f) // the generator checked each one
			x.fallbacks = append(x.fallbacks, fb)
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
				if a.op != matchEquals {
					x.patterns = append(x.patterns, modelPattern{model: int32(i), match: b.compile(a)})
					continue
				}
				hits := c.exact[a.text]
				if !slices.ContainsFunc(hits, func(h exactHit) bool { return h.provider == int32(pi) }) {
					c.exact[a.text] = append(hits, exactHit{int32(pi), int32(i)})
				}
			}
		}
	}
	return c
}

// provider is the index of the provider with this id.
func (c *catalog) provider(id string) (int, bool) {
	for p := range c.providers {
		if c.providers[p].id == id {
			return p, true
		}
	}
	return 0, false
}

// builder compiles matches, each regexp once.
type builder struct{ regexps map[string]compiled }

func (b *builder) compile(m match) compiled {
	c := compiled{op: m.op, text: m.text}
	for _, o := range m.of {
		c.of = append(c.of, b.compile(o))
	}
	switch m.op {
	case matchEquals, matchStartsWith, matchEndsWith, matchContains:
		c.need = bytesOf(m.text)
	case matchRegexp:
		if done, ok := b.regexps[m.text]; ok {
			return done
		}
		c.re = regexp.MustCompile(m.text) // the generator compiled each one
		prefix, _ := c.re.LiteralPrefix() // in every match, so in the name
		c.need = bytesOf(prefix)
		c.first = firstBytes(m.text)
		b.regexps[m.text] = c
	case matchAnd: // every part's; the cheapest tried first
		for _, o := range c.of {
			c.need |= o.need
		}
		slices.SortStableFunc(c.of, func(a, b compiled) int { return cost(a.op) - cost(b.op) })
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

// cost ranks what trying a pattern costs: texts, then parts, then a
// regexp, then a negation (a regexp that rules nothing out by itself).
func cost(op matchOp) int {
	switch op {
	case matchRegexp:
		return 2
	case matchNot:
		return 3
	case matchAnd, matchOr:
		return 1
	}
	return 0
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

// firstBytes is the set of bytes a match of a ^-anchored regexp can begin
// with (the first runes its program can read, UTF-8's leading bytes for
// those past ASCII); nil when the regexp is not anchored, or may match the
// empty string, or the set would take more than following its program to
// its first runes.
func firstBytes(pattern string) *[4]uint64 {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil || prog.StartCond()&syntax.EmptyBeginText == 0 {
		return nil
	}
	var set [4]uint64
	add := func(lo, hi rune) {
		for r := lo; r <= hi && r < 0x80; r++ {
			set[r/64] |= 1 << (r % 64)
		}
		if hi >= 0x80 {
			set[2], set[3] = ^uint64(0), ^uint64(0)
		}
	}
	seen := make([]bool, len(prog.Inst))
	for stack := []uint32{uint32(prog.Start)}; len(stack) > 0; {
		pc := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[pc] {
			continue
		}
		seen[pc] = true
		switch i := &prog.Inst[pc]; i.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			stack = append(stack, i.Out, i.Arg)
		case syntax.InstCapture, syntax.InstNop:
			stack = append(stack, i.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(i.Arg)&^(syntax.EmptyBeginText|syntax.EmptyBeginLine) != 0 {
				return nil
			}
			stack = append(stack, i.Out)
		case syntax.InstRune1:
			add(i.Rune[0], i.Rune[0])
		case syntax.InstRune:
			if syntax.Flags(i.Arg)&syntax.FoldCase != 0 || len(i.Rune)%2 != 0 {
				return nil
			}
			for j := 0; j < len(i.Rune); j += 2 {
				add(i.Rune[j], i.Rune[j+1])
			}
		case syntax.InstFail:
		default: // InstMatch: the empty string matches; any rune
			return nil
		}
	}
	return &set
}

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
		if m.first != nil && (name == "" || m.first[name[0]/64]&(1<<(name[0]%64)) == 0) {
			return false
		}
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
