package config

import (
	"regexp"
	"slices"
	"strings"
)

// modelIndex looks a model name up among entries keyed the way
// token_weights.models and pricing are: an exact name, a prefix
// ("claude-opus-4*") or a regexp ("regexp:<re>"). An exact name wins, then
// the longest prefix the name starts with (two prefixes of one length
// cannot both match), then the first regexp in configuration order that
// matches it. A lookup of an exact name costs one map access.
type modelIndex[V any] struct {
	exact    map[string]V
	patterns []modelPattern[V] // the prefixes, longest first, then the regexps in configuration order
}

type modelPattern[V any] struct {
	kind   ModelKind
	prefix string         // ModelPrefix
	re     *regexp.Regexp // ModelRegexp
	value  V
}

// add indexes an entry; build must be called once they all are.
func (ix *modelIndex[V]) add(kind ModelKind, name string, re *regexp.Regexp, v V) {
	if ix.exact == nil {
		ix.exact = map[string]V{}
	}
	switch kind {
	case ModelExact:
		ix.exact[name] = v
	case ModelPrefix:
		ix.patterns = append(ix.patterns, modelPattern[V]{kind: kind, prefix: name, value: v})
	case ModelRegexp:
		ix.patterns = append(ix.patterns, modelPattern[V]{kind: kind, re: re, value: v})
	}
}

// build orders the patterns: the prefixes, longest first, before the
// regexps, which keep their configuration order.
func (ix *modelIndex[V]) build() {
	slices.SortStableFunc(ix.patterns, func(a, b modelPattern[V]) int {
		switch {
		case a.kind != b.kind:
			return int(a.kind) - int(b.kind) // ModelPrefix before ModelRegexp
		case a.kind == ModelPrefix:
			return len(b.prefix) - len(a.prefix)
		}
		return 0
	})
}

// lookup returns the value of the entry that matches model, if any; ""
// matches none.
func (ix *modelIndex[V]) lookup(model string) (V, bool) {
	if v, ok := ix.exact[model]; ok {
		return v, true
	}
	if model != "" {
		for i := range ix.patterns {
			p := &ix.patterns[i]
			if p.kind == ModelPrefix && strings.HasPrefix(model, p.prefix) || p.kind == ModelRegexp && p.re.MatchString(model) {
				return p.value, true
			}
		}
	}
	var zero V
	return zero, false
}
