package config

import (
	"slices"
	"strconv"
)

// One subject, counted once: when several matches of a request name the
// same subject (the same Redis key), they are merged into one match whose
// limits are all of theirs, each window once.

// Shared is the limits of a subject that more than one match of a request
// names: rule items of one type that read one source (two
// limit_by_per_header items reading x-api-key, a limit_by_per_ip item for
// everyone and another for 10.0.0.0/8; two limit_by_header items with the
// same key), whose keys both match the request's value, or the per_model
// entries of such keys for the same model. Without merging, a request would
// count twice in the windows they share.
//
// Each window (a unit and a length) is counted once, at the tightest limit
// configured for it: a hard limit before a soft one (a soft limit never
// rejects, so a hard one for the same window is the one that holds), and
// among limits of the same kind the lowest; the first configured on a tie.
// The fewest requests in progress (max_concurrent_requests) holds likewise.
type Shared struct {
	// Windows are the subject's windows, sorted as a LimitKey's are (by
	// length, then unit).
	Windows []Window
	// From[j] is the index in Matches of the match whose limit Windows[j]
	// is: its key says whether the window is soft, and names the limit.
	From []int
	// MaxConcurrent is the tightest max_concurrent_requests of the
	// matches (0: none has one); ConcurrentFrom the index in Matches of the
	// match it is from.
	MaxConcurrent  int64
	ConcurrentFrom int
	// Matches are the matches of the subject, in the order they were made;
	// none of them has a Shared of its own. The first is the match this
	// Shared is part of, without it.
	Matches []Match
}

// Windows returns the windows of the match's subject: its key's, or, when
// other matches name the same subject, all of theirs (see Shared).
func (m *Match) Windows() []Window {
	if m.Shared != nil {
		return m.Shared.Windows
	}
	return m.Key.Windows
}

// MaxConcurrent returns the subject's max_concurrent_requests (0: none).
func (m *Match) MaxConcurrent() int64 {
	if m.Shared != nil {
		return m.Shared.MaxConcurrent
	}
	return m.Key.MaxConcurrent
}

// WindowFrom returns the match whose limit window j of Windows is: m
// itself unless the subject is shared. Its Key says whether the window is
// soft, and it names the limit in messages, headers and alerts.
func (m *Match) WindowFrom(j int) Match {
	if m.Shared != nil && j >= 0 && j < len(m.Shared.From) {
		return m.Shared.Matches[m.Shared.From[j]]
	}
	return m.withoutShared()
}

// ConcurrencyFrom returns the match whose max_concurrent_requests limits
// the subject, as WindowFrom does for a window.
func (m *Match) ConcurrencyFrom() Match {
	if m.Shared != nil {
		return m.Shared.Matches[m.Shared.ConcurrentFrom]
	}
	return m.withoutShared()
}

// Merged returns every match of the subject, in the order they were made:
// m alone unless it is shared.
func (m *Match) Merged() []Match {
	if m.Shared != nil {
		return m.Shared.Matches
	}
	return []Match{m.withoutShared()}
}

func (m *Match) withoutShared() Match {
	o := *m
	o.Shared = nil
	return o
}

// SameSubject reports whether two matches name the same subject: the same
// threshold, or rule items of the same type that read the same source, with
// the same value; for per_model matches, within that subject, the same
// model. Such matches have the same Redis key (see package cachekey).
func (m *Match) SameSubject(o *Match) bool {
	if m.Value != o.Value || m.Unmatched != o.Unmatched || (m.Parent == nil) != (o.Parent == nil) {
		return false
	}
	if m.Parent != nil && m.Model != o.Model {
		return false
	}
	if m.Item == nil || o.Item == nil {
		return m.Item == o.Item // the thresholds: global, or unmatched (which Unmatched tells apart)
	}
	return m.Item.Type == o.Item.Type && m.Item.Name == o.Item.Name
}

// sameMatch reports whether two matches are one: the same key of the same
// item (or threshold) for the same value and model.
func sameMatch(a, b *Match) bool {
	return a.Item == b.Item && a.Key == b.Key && a.Value == b.Value && a.Model == b.Model && a.Unmatched == b.Unmatched
}

// includes reports whether m is, or is merged from, a match that is o.
func (m *Match) includes(o *Match) bool {
	if m.Shared == nil {
		return sameMatch(m, o)
	}
	for i := range m.Shared.Matches {
		if sameMatch(&m.Shared.Matches[i], o) {
			return true
		}
	}
	return false
}

// AddMatch appends m to dst, or, when a match in dst names the same subject,
// merges m into it (see Shared); a match already there is not added again.
// The request is then counted once in each of the subject's windows.
func AddMatch(dst []Match, m Match) []Match { return addMatch(dst, 0, m) }

// addMatch is AddMatch among dst[start:].
func addMatch(dst []Match, start int, m Match) []Match {
	for i := start; i < len(dst); i++ {
		d := &dst[i]
		if !d.SameSubject(&m) {
			continue
		}
		for _, o := range m.Merged() {
			if !d.includes(&o) {
				d.merge(o)
			}
		}
		return dst
	}
	return append(dst, m)
}

// merge merges into m the limits of o, a match of the same subject that
// is not shared itself.
func (m *Match) merge(o Match) {
	s := m.Shared
	if s == nil {
		first := m.withoutShared()
		s = &Shared{Matches: append(make([]Match, 0, 2), first), MaxConcurrent: first.Key.MaxConcurrent}
		s.Windows = append(make([]Window, 0, len(first.Key.Windows)+len(o.Key.Windows)), first.Key.Windows...)
		s.From = make([]int, len(first.Key.Windows), cap(s.Windows))
		m.Shared = s
	}
	s.Matches = append(s.Matches, o)
	from := len(s.Matches) - 1
	for _, w := range o.Key.Windows {
		s.addWindow(w, from, o.Key.Soft)
	}
	if c := o.Key.MaxConcurrent; c > 0 && (s.MaxConcurrent == 0 || c < s.MaxConcurrent) {
		s.MaxConcurrent, s.ConcurrentFrom = c, from
	}
}

// addWindow adds window w of the match at index from (soft: its key is):
// as a window of its own, in order, or in place of the subject's window of
// the same unit and length when it is tighter (see Shared).
func (s *Shared) addWindow(w Window, from int, soft bool) {
	i := 0
	for ; i < len(s.Windows); i++ {
		v := s.Windows[i]
		if v.Seconds != w.Seconds || v.Unit != w.Unit {
			if v.Seconds > w.Seconds || v.Seconds == w.Seconds && v.Unit > w.Unit {
				break // w goes before v
			}
			continue
		}
		heldSoft := s.Matches[s.From[i]].Key.Soft
		if heldSoft && !soft || heldSoft == soft && w.Limit < v.Limit {
			s.Windows[i], s.From[i] = w, from
		}
		return
	}
	s.Windows = slices.Insert(s.Windows, i, w)
	s.From = slices.Insert(s.From, i, from)
}

// ItemOverlap is a note about two rule items that read the same value of a
// request (the same header, parameter, cookie, client IP or model), for
// the log when the plugin starts and `atrl check`.
type ItemOverlap struct {
	// Merged says the two items are of one type: a value both match names
	// one subject, counted once (see Shared). Otherwise they are of
	// different types (limit_by_header and limit_by_per_header of one
	// header): a request both match is limited by both, which a
	// configuration written for first-match may not mean.
	Merged bool
	Text   string
}

// Overlaps lists the pairs of rule items that read the same value, under
// rule_match_mode all (under first, one item applies at a time).
func (c *Config) Overlaps() []ItemOverlap {
	if c.MatchMode != MatchAll {
		return nil
	}
	var out []ItemOverlap
	for i := range c.Items {
		for j := i + 1; j < len(c.Items); j++ {
			a, b := &c.Items[i], &c.Items[j]
			if !a.readsLike(b) {
				continue
			}
			pair := "rule_items[" + strconv.Itoa(i) + "] (" + a.Describe() + ") and rule_items[" + strconv.Itoa(j) + "] (" + b.Describe() + ")"
			if a.Type == b.Type {
				out = append(out, ItemOverlap{Merged: true, Text: pair + " name one subject for a value both match: " +
					"it is counted once, each window at the tighter limit of the two"})
				continue
			}
			out = append(out, ItemOverlap{Text: pair + " read the same value: every rule item that matches applies " +
				"(as in Higress 2.2.4), so a request both match is limited by both; to give a value limits of its own " +
				"instead, make it a key of one item, before the keys that match any value, or set rule_match_mode: first"})
		}
	}
	return out
}

// readsLike says whether two items read the same value of a request: the
// same source, or an API key item and an item reading one of the places an
// API key travels in (apikey.go).
func (it *RuleItem) readsLike(o *RuleItem) bool {
	return it.source() == o.source() || it.Type.ReadsAPIKey() && o.readsAPIKeyPlace() || o.Type.ReadsAPIKey() && it.readsAPIKeyPlace()
}

// readsAPIKeyPlace says whether an item reads a header or parameter an API
// key travels in.
func (it *RuleItem) readsAPIKeyPlace() bool {
	switch it.Type {
	case ByHeader, ByPerHeader:
		return slices.Contains(apiKeyHeaders[:], it.Name)
	case ByParam, ByPerParam:
		return it.Name == apiKeyParam
	}
	return false
}

// source says what an item reads: a header, a parameter, a cookie, the
// client's IP (from a header, or the peer), or the model.
func (it *RuleItem) source() [2]string {
	switch it.Type {
	case ByHeader, ByPerHeader, ByConsumer, ByPerConsumer:
		return [2]string{"header", it.Name}
	case ByParam, ByPerParam:
		return [2]string{"param", it.Name}
	case ByCookie, ByPerCookie:
		return [2]string{"cookie", it.Name}
	case ByPerIP:
		return [2]string{"ip", it.Name}
	case ByAPIKey, ByPerAPIKey:
		return [2]string{"api key", ""}
	}
	return [2]string{"model", ""}
}

// Describe names an item as configured: "limit_by_per_header x-api-key",
// "limit_by_consumer", "limit_by_per_api_key".
func (it *RuleItem) Describe() string {
	if it.Raw == "" || it.Type == ByConsumer || it.Type == ByPerConsumer {
		return it.Type.String()
	}
	return it.Type.String() + " " + it.Raw
}
