package tokenusage

// startObject begins capturing a usage object whose '{' was just consumed.
func (p *Parser) startObject() {
	p.state = capturing
	p.obj = appendBounded(p.obj[:0], []byte("{"))
	p.depth = 1
	p.inString = false
	p.escaped = false
}

// capture copies the usage object's bytes from data until its closing brace,
// then applies it. It returns the input after the object, or nil once data is
// used up. An object outgrowing MaxUsageObjectBytes is dropped and scanning
// resumes at its first byte that did not fit.
func (p *Parser) capture(data []byte) []byte {
	room := MaxUsageObjectBytes - len(p.obj)
	n, closed := p.track(data[:min(len(data), room)])
	p.obj = appendBounded(p.obj, data[:n])
	switch {
	case closed:
		p.raw.apply(p.obj)
		p.resumeScan(false)
	case n < len(data):
		// Over the cap. The escape state tells whether the byte we resume
		// at follows an escaping backslash.
		p.obj = p.obj[:0]
		p.resumeScan(p.escaped)
	}
	return data[n:]
}

// track advances the brace and string state over data. It returns how many
// bytes of data belong to the object and whether the object closed there.
// It looks at every byte, but only ever over the usage object itself.
func (p *Parser) track(data []byte) (n int, closed bool) {
	for i, c := range data {
		switch {
		case p.escaped:
			p.escaped = false
		case p.inString:
			switch c {
			case '\\':
				p.escaped = true
			case '"':
				p.inString = false
			}
		case c == '"':
			p.inString = true
		case c == '{':
			p.depth++
		case c == '}':
			p.depth--
			if p.depth == 0 {
				return i + 1, true
			}
		}
	}
	return len(data), false
}

// appendBounded appends b to buf, growing buf geometrically but never beyond
// MaxUsageObjectBytes; the caller guarantees the result fits.
func appendBounded(buf, b []byte) []byte {
	if need := len(buf) + len(b); need > cap(buf) {
		grown := make([]byte, len(buf), min(max(2*cap(buf), need, 256), MaxUsageObjectBytes))
		copy(grown, buf)
		buf = grown
	}
	return append(buf, b...)
}
