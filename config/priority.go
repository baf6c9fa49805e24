package config

import (
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Priority (priority, and a limit's reserve): the last part of a shared
// limit kept for the requests that matter. priority names the levels,
// highest first; a request's level is the least privileged its readings
// give (the limit keys its values match, its priority header, the
// default: see LevelOf). A limit's reserve keeps a percent of each of its windows (and of
// its concurrency slots) for a level and the levels above it: a request of
// level L may use a limit up to the share the levels above L leave open,
// limit × (100 − Σ reserve of the levels above L) / 100.

// MaxLevels bounds priority.levels.
const MaxLevels = 8

// Priority is priority.
type Priority struct {
	// Levels are the levels, highest first; a level is its index in them.
	Levels []string
	// Default is the level of a request that names none: priority.default,
	// else the lowest.
	Default int
	// Header is priority.header, lower-cased: a request header that names
	// a level ("": none).
	Header string
}

// OpenShares is, for each level, the percent of a limit open to requests
// of that level (the rest is kept for the levels above it).
type OpenShares [MaxLevels]int64

// Level returns the index of a level's name, and whether it is one.
func (p *Priority) Level(name string) (int, bool) {
	for i, l := range p.Levels {
		if l == name {
			return i, true
		}
	}
	return 0, false
}

// NoLevel is a level not known yet: that of a request's priority header
// before any of its values is read (see HeaderLevel), or of one that sends
// none.
const NoLevel = -1

// HeaderLevel folds into level (NoLevel before the first) one line of a
// request's priority header: each of its comma-separated values names a
// level, or counts as the default when it names none (a blank one
// included), and the lowest of them and level holds. A header sent on
// several lines is read line by line, each folded in turn: where the
// values disagree, the least privileged one wins.
func (p *Priority) HeaderLevel(level int, line string) int {
	for rest := line; ; {
		v, more := rest, false
		if i := strings.IndexByte(rest, ','); i >= 0 {
			v, rest, more = rest[:i], rest[i+1:], true
		}
		l, ok := p.Level(trimOWS(v))
		if !ok {
			l = p.Default
		}
		level = max(level, l)
		if !more {
			return level
		}
	}
}

// LevelOf is the level of request r, which matched matches, whose priority
// header names header (HeaderLevel; NoLevel when it sends none) and whose
// model may also be each of others (an ambiguous body's): the least
// privileged of the levels its readings give, so that a value a client
// makes up can lower its level, never lift it. 0 without priority.
//
// The fallback is the header's level, else the default. Each rule item
// with a key that has a priority gives a level: the lowest of those of
// every value the request carries for it (each API key it carries, the
// first and the last value of a parameter or cookie, the header, the
// client IP, the model and its others), each value giving the priority of
// the key that matches it, or the fallback when that key has none or no
// key matches it. An item the request carries no value for gives none,
// nor does one whose keys have no priority (whatever rule_match_mode says:
// an item the request need not reach still reads it). global_threshold,
// and unmatched_threshold when the request matched it, give their
// priority if they have one. The request's level is the lowest of all
// those given, else the fallback.
func (c *Config) LevelOf(r Request, others []string, matches []Match, header int) int {
	p := c.Priority
	if p == nil {
		return 0
	}
	fallback := header
	if fallback == NoLevel {
		fallback = p.Default
	}
	level := NoLevel
	for i := range matches {
		if m := &matches[i]; m.Item == nil && m.Parent == nil && m.Key.priority > 0 {
			level = max(level, m.Key.priority-1)
		}
	}
	for i := range c.Items {
		if it := &c.Items[i]; it.prioritized() {
			level = c.itemLevel(it, r, others, fallback, level)
		}
	}
	if level == NoLevel {
		return fallback
	}
	return level
}

// prioritized reports whether a key of the item has a priority.
func (it *RuleItem) prioritized() bool {
	for j := range it.Keys {
		if it.Keys[j].priority > 0 {
			return true
		}
	}
	return false
}

// levelOr is the level of a value key k matches: k's priority, or fallback
// when k has none or is nil (the value matches no key).
func (k *LimitKey) levelOr(fallback int) int {
	if k == nil || k.priority == 0 {
		return fallback
	}
	return k.priority - 1
}

// itemLevel folds into level the levels rule item it gives each value of
// r it reads (see LevelOf).
func (c *Config) itemLevel(it *RuleItem, r Request, others []string, fallback, level int) int {
	switch {
	case it.Type == ByPerIP:
		if addr, ok := ClientIP(r, it.Name, c.XFFTrustedHops); ok {
			var s string
			level = max(level, it.addrKey(addr, &s).levelOr(fallback))
		}
	case it.Type.ReadsAPIKey():
		keys, n := APIKeys(r)
		for _, v := range keys[:n] {
			level = max(level, it.keyFor(v).levelOr(fallback))
		}
	case it.Type.ModelValued():
		level = it.modelLevel(r.Model(), fallback, level)
		for _, m := range others {
			level = it.modelLevel(m, fallback, level)
		}
	default:
		first, last := it.values(r)
		for i, v := range [2]string{first, last} {
			if i == 1 && v == first {
				break
			}
			if v = it.normalize(v); v != "" {
				level = max(level, it.keyFor(v).levelOr(fallback))
			}
		}
	}
	return level
}

// modelLevel folds into level the level a model item gives model ("":
// none). An UnknownModel may be any model: it gives the lowest of every
// key's level and the fallback (a model no key matches).
func (it *RuleItem) modelLevel(model string, fallback, level int) int {
	switch model {
	case "":
		return level
	case UnknownModel:
		level = max(level, fallback)
		for j := range it.Keys {
			level = max(level, it.Keys[j].levelOr(fallback))
		}
		return level
	}
	return max(level, it.keyFor(model).levelOr(fallback))
}

// Share is what of limit is open to a level with open percent of it: the
// limit × open / 100, rounded down, exactly for every limit up to MaxLimit
// (as admit.lua works it out).
func Share(limit, open int64) int64 {
	if open >= 100 {
		return limit
	}
	return limit/100*open + limit%100*open/100
}

// Open is the percent of window w open to level (100: all of it).
func (w *Window) Open(level int) int64 {
	if w.open == nil {
		return 100
	}
	return w.open[level]
}

// ConcurrentOpen is the percent of the key's max_concurrent_requests open
// to level.
func (k *LimitKey) ConcurrentOpen(level int) int64 {
	if k.open == nil {
		return 100
	}
	return k.open[level]
}

// ConcurrentOpen is the percent of the match's max_concurrent_requests
// (MaxConcurrent) open to level: its key's reserve, or that of the match
// it is from where the subject is shared.
func (m *Match) ConcurrentOpen(level int) int64 {
	return m.ConcurrencyFrom().Key.ConcurrentOpen(level)
}

// levelShare is an entry of a limit's reserve as configured.
type levelShare struct {
	level   string
	percent int64
}

// readPriority reads priority.
func readPriority(c *Config, path string, v gjson.Result) error {
	members, err := readMembers(path, v, []string{"levels", "default", "header"}, nil)
	if err != nil {
		return err
	}
	p := &Priority{}
	lv, ok := members["levels"]
	if !ok {
		return fieldErr(path, `needs "levels": the levels, highest first`)
	}
	at := path + ".levels"
	if !lv.IsArray() {
		return fieldErr(at, "must be a list of level names, highest first, got ", describe(lv))
	}
	list := lv.Array()
	if len(list) < 2 || len(list) > MaxLevels {
		return fieldErr(at, "must name 2 to ", strconv.Itoa(MaxLevels), " levels, got ", strconv.Itoa(len(list)))
	}
	for i, e := range list {
		name, err := readString(index(at, i), e)
		if err != nil {
			return err
		}
		if !levelName(name) {
			return fieldErr(index(at, i), "must be a name of letters, digits, '_' and '-', got ", quote(name))
		}
		if _, dup := p.Level(name); dup {
			return fieldErr(index(at, i), "names ", quote(name), " twice")
		}
		p.Levels = append(p.Levels, name)
	}
	p.Default = len(p.Levels) - 1
	if d, ok := members["default"]; ok {
		name, err := readString(path+".default", d)
		if err != nil {
			return err
		}
		if p.Default, ok = p.Level(name); !ok {
			return fieldErr(path+".default", "unknown level ", quote(name), " (levels: ", strings.Join(p.Levels, ", "), ")")
		}
	}
	if h, ok := members["header"]; ok {
		name, err := readNonEmptyString(path+".header", h)
		if err != nil {
			return err
		}
		if !validHeaderName(name) || strings.HasPrefix(name, ":") {
			return fieldErr(path+".header", "invalid header name ", quote(name))
		}
		p.Header = strings.ToLower(name)
	}
	c.Priority = p
	return nil
}

// levelName reports whether s may name a level: it names metrics too.
func levelName(s string) bool { return plainName(s, 32) }

// readKeyPriority reads the priority of a limit key: a level's name,
// resolved once priority is read (checkPriority).
func readKeyPriority(k *LimitKey, path string, v gjson.Result) (err error) {
	k.priorityName, err = readNonEmptyString(path, v)
	return err
}

// readReserve reads a limit's reserve: {<level>: <percent>}, each percent
// an integer from 1 to 99, resolved once priority is read (checkPriority).
func readReserve(k *LimitKey, path string, v gjson.Result) (err error) {
	if !v.IsObject() {
		return fieldErr(path, "must be an object of percents by level ({high: 30}), got ", describe(v))
	}
	k.reserve = nil
	v.ForEach(func(name, pv gjson.Result) bool {
		var n int64
		if n, err = readInt(child(path, name.String()), pv, 1, 99); err != nil {
			return false
		}
		for _, s := range k.reserve {
			if s.level == name.String() {
				err = fieldErr(child(path, name.String()), "duplicate field")
				return false
			}
		}
		k.reserve = append(k.reserve, levelShare{level: name.String(), percent: n})
		return true
	})
	if err == nil && len(k.reserve) == 0 {
		err = fieldErr(path, "must keep a percent for at least one level")
	}
	return err
}

// checkPriority resolves the limit keys' priority and reserve against the
// levels: every level named must be one, a reserve for the lowest level
// keeps nothing from anyone, and the reserves of a limit must leave some of
// it to the lowest level (they add up to less than 100).
func (c *Config) checkPriority() (err error) {
	c.eachLimitKey(func(path string, k *LimitKey, _ string) bool {
		if c.Priority == nil {
			switch {
			case k.priorityName != "":
				err = fieldErr(path+".priority", "needs priority at the top level: the levels, highest first")
			case k.reserve != nil:
				err = fieldErr(path+".reserve", "needs priority at the top level: the levels, highest first")
			}
			return err == nil
		}
		err = c.Priority.resolve(path, k)
		return err == nil
	})
	return err
}

// resolve sets k's priority and the shares of its limits open to each level.
func (p *Priority) resolve(path string, k *LimitKey) error {
	if k.priorityName != "" {
		l, ok := p.Level(k.priorityName)
		if !ok {
			return fieldErr(path+".priority", "unknown level ", quote(k.priorityName), " (levels: ", strings.Join(p.Levels, ", "), ")")
		}
		k.priority = l + 1
	}
	if k.reserve == nil {
		return nil
	}
	var kept [MaxLevels]int64
	sum := int64(0)
	for _, s := range k.reserve {
		at := child(path+".reserve", s.level)
		l, ok := p.Level(s.level)
		switch {
		case !ok:
			return fieldErr(at, "unknown level ", quote(s.level), " (levels: ", strings.Join(p.Levels, ", "), ")")
		case l == len(p.Levels)-1:
			return fieldErr(at, "keeps part of the limit for the lowest level, which every request is at least: reserve for the levels above it")
		}
		kept[l] = s.percent
		sum += s.percent
	}
	if sum >= 100 {
		return fieldErr(path+".reserve", "keeps ", strconv.FormatInt(sum, 10), " % for the levels above the lowest: it must leave it some (less than 100 in all)")
	}
	open := new(OpenShares)
	above := int64(0)
	for l := range p.Levels {
		open[l] = 100 - above
		above += kept[l]
	}
	k.open = open
	for j := range k.Windows {
		k.Windows[j].open = open
	}
	return nil
}
