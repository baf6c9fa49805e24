package budget

import (
	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// Subject is one limited subject: its windows and its concurrency limit.
type Subject struct {
	Key        []byte
	Windows    []config.Window
	Concurrent int64 // at most this many of its requests in progress; 0: no limit
	// Suffix, when not 0, says that Key is the key of the subject before it
	// in the call followed by a suffix of this many bytes, starting with
	// ':' (a per_model limit after its parent, see cachekey.AppendModel):
	// admissions and charges then send the suffix alone, in the subject's
	// head, rather than a key of its own.
	Suffix int
	// SoftWindows has bit j set when Windows[j] is soft: it never rejects
	// (config.LimitKey.Soft of the key the window is from, shadow_mode);
	// AllSoft for all of them. SoftConcurrency says its concurrency limit
	// does not reject either (shadow_mode). They count, lease and show as
	// usual.
	SoftWindows     uint32
	SoftConcurrency bool
	// Level is the priority level of the request it limits (see
	// config.Priority): each window is checked against the share of its
	// limit open to that level (config.Window.Open), its concurrency limit
	// against ConcurrentOpen percent of it (0: all of it); see Open.
	Level          int
	ConcurrentOpen int64
	// Secret says its value is read from a credential (see
	// config.RuleItem.Secret): logs name it by LogName.
	Secret bool
}

// LogName is the subject's key as a log line shows it: with its value
// (the last part of its hash tag, see cachekey.Parts) fingerprinted when it
// is read from a credential (see config.Fingerprint). A value the key holds
// hashed ('#' and hex digits) is shown as it is.
func (s *Subject) LogName() string {
	key := string(s.Key)
	if !s.Secret {
		return key
	}
	parts, tail, ok := cachekey.Parts(key)
	if value := parts[3]; !ok || value == "" || value[0] == '#' {
		return key
	}
	end := len(key) - len(tail) - 1 // the '}' after the value
	return key[:end-len(parts[3])] + config.Fingerprint(parts[3]) + key[end:]
}

// Open is the percent of limit j of the subject (-1: its concurrency
// limit) open to its request's priority level: 100 when every level may use
// all of it.
func (s *Subject) Open(j int) int64 {
	if j >= 0 {
		return s.Windows[j].Open(s.Level)
	}
	if s.ConcurrentOpen == 0 {
		return 100
	}
	return s.ConcurrentOpen
}

// AllSoft is Subject.SoftWindows when every window is soft.
const AllSoft = ^uint32(0)

// WindowSoft reports whether window j of the subject is soft.
func (s *Subject) WindowSoft(j int) bool { return s.SoftWindows>>j&1 != 0 }

// SubjectOf is the subject a match limits, under the rules: its Redis key
// (see package cachekey) and, for a per_model limit, the length of the
// suffix it adds to its parent's key; its windows and concurrency limit
// (all of those of the matches merged into it: see config.Shared).
func SubjectOf(rules *config.Config, m config.Match) Subject {
	dst := make([]byte, 0, 96)
	switch {
	case m.Unmatched:
		dst = cachekey.AppendSubject(dst, rules.RuleName, config.UnmatchedThreshold, "", "")
	case m.Item == nil:
		dst = cachekey.AppendSubject(dst, rules.RuleName, config.GlobalThreshold, "", "")
	default:
		dst = cachekey.AppendSubject(dst, rules.RuleName, m.Item.Type.String(), m.Item.Name, m.Value)
	}
	s := Subject{Windows: m.Windows(), Concurrent: m.MaxConcurrent(), SoftConcurrency: rules.Shadow, Secret: m.Secret()}
	switch {
	case rules.Shadow || m.Shared == nil && m.Key.Soft:
		s.SoftWindows = AllSoft
	case m.Shared != nil: // each window as soft as the key it is from
		for j := range s.Windows {
			if m.WindowFrom(j).Key.Soft {
				s.SoftWindows |= 1 << j
			}
		}
	}
	if m.Parent != nil { // a per_model limit: the subject together with the model, in its slot
		parent := len(dst)
		dst = cachekey.AppendModel(dst, m.Model)
		s.Suffix = len(dst) - parent // sent as a suffix of its parent's key (see Subject)
	}
	s.Key = dst
	return s
}
