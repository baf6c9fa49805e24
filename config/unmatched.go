package config

import "strings"

// DescribeUnmatched says, for the warning about a request that no rule item
// matched, what each rule item reads and what it found: "absent", or
// "present, matches no key". It never writes a value: it may be a
// credential. A header that arrives under another name than the one an
// item reads (an SDK's own key header) shows here as absent.
func (c *Config) DescribeUnmatched(r Request) string {
	var b strings.Builder
	for i := range c.Items {
		it := &c.Items[i]
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(it.Type.String())
		if it.Raw != "" {
			b.WriteByte(' ')
			b.WriteString(it.Raw)
		}
		b.WriteString(": ")
		var present bool
		switch it.Type {
		case ByPerIP:
			b.WriteString("the client address matches no key")
			continue
		case ByModel, ByPerModel:
			present = r.Model() != ""
		default:
			first, last := it.values(r)
			present = it.normalize(first) != "" || it.normalize(last) != ""
		}
		if present {
			b.WriteString("present, matches no key")
		} else {
			b.WriteString("absent")
		}
	}
	return b.String()
}
