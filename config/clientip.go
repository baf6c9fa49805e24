package config

import (
	"net/netip"
	"strings"
)

// matchIP matches a limit_by_per_ip item: its first key that matches the
// client's address. The subject is the address; for an IPv6 client, its
// network of IPv6PrefixLength bits, or of the key's length when the key is
// a narrower network (so that the clients of one network matching
// different keys never share a counter under different limits). Keys match
// the whole address.
func (c *Config) matchIP(it *RuleItem, r Request) (Match, bool) {
	addr, ok := ClientIP(r, it.Name, c.XFFTrustedHops)
	if !ok {
		return Match{}, false
	}
	return c.matchAddr(it, addr)
}

// matchAddr matches a limit_by_per_ip item against a client's address, as
// matchIP.
func (c *Config) matchAddr(it *RuleItem, addr netip.Addr) (Match, bool) {
	var s string // addr.String(), computed at most once
	k := it.addrKey(addr, &s)
	if k == nil {
		return Match{}, false
	}
	if bits := c.ipv6Bits(addr, k); bits < addr.BitLen() {
		var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte // one allocation, not Prefix.String's two
		return Match{Item: it, Key: k, Value: string(netip.PrefixFrom(addr, bits).Masked().AppendTo(buf[:0]))}, true
	}
	if s == "" {
		s = addr.String()
	}
	return Match{Item: it, Key: k, Value: s}, true
}

// addrKey is the first key of a limit_by_per_ip item that matches a
// client's address (nil: none). s is addr.String() once a regexp key has
// needed it, else "": it is computed at most once.
func (it *RuleItem) addrKey(addr netip.Addr, s *string) *LimitKey {
	for j := range it.Keys {
		k := &it.Keys[j]
		switch k.Kind {
		case KeyAny:
		case KeyIPNet:
			if !k.Prefix.Contains(addr) {
				continue
			}
		case KeyRegexp:
			if *s == "" {
				*s = addr.String()
			}
			if !k.matchRegexp(*s) {
				continue
			}
		default:
			continue
		}
		return k
	}
	return nil
}

// ipv6Bits is the length of the network that is the subject of addr,
// matched by k: IPv6PrefixLength for an IPv6 address, or k's length when k
// is a narrower network; the whole address for IPv4.
func (c *Config) ipv6Bits(addr netip.Addr, k *LimitKey) int {
	if !addr.Is6() {
		return addr.BitLen()
	}
	bits := c.IPv6PrefixLength
	if k.Kind == KeyIPNet && k.Prefix.Bits() > bits {
		bits = k.Prefix.Bits()
	}
	return bits
}

// ClientIP returns the client IP of r for a limit_by_per_ip rule reading
// headerName ("" for the connection's peer address).
//
// The header value is a comma-separated list. With trustedHops < 0 (unset),
// or for a header other than x-forwarded-for, the left-most entry is used, as
// Higress does (for x-forwarded-for it is client-writable, so spoofable); an
// absent or unparsable entry gives ok == false.
//
// For x-forwarded-for with trustedHops = N >= 0, the client is the (N+1)-th
// entry from the right, as Envoy's xff_num_trusted_hops defines it; when the
// list has fewer than N+1 entries or that entry is not an IP, the peer
// address is used.
//
// Entries are trimmed of spaces and may carry a port ("1.2.3.4:567",
// "[2001:db8::1]:443") or brackets; zones are dropped and IPv4-mapped IPv6
// addresses are unmapped.
func ClientIP(r Request, headerName string, trustedHops int) (netip.Addr, bool) {
	if headerName == "" {
		return ParseIP(r.PeerAddress())
	}
	v := r.Header(headerName)
	if trustedHops >= 0 && headerName == XForwardedForHeader {
		if e, ok := nthFromRight(v, trustedHops); ok {
			if a, ok := ParseIP(e); ok {
				return a, true
			}
		}
		return ParseIP(r.PeerAddress())
	}
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return ParseIP(v)
}

// nthFromRight returns the n-th (0-based) entry from the right of a
// comma-separated list; a blank list has no entries.
func nthFromRight(list string, n int) (string, bool) {
	if trimSpace(list) == "" {
		return "", false
	}
	end := len(list)
	for i := len(list) - 1; i >= 0; i-- {
		if list[i] == ',' {
			if n == 0 {
				return list[i+1 : end], true
			}
			n--
			end = i
		}
	}
	if n == 0 {
		return list[:end], true
	}
	return "", false
}

// ParseIP parses an address as found in a forwarding header or Envoy's
// source.address: "1.2.3.4", "1.2.3.4:567", "2001:db8::1", "[2001:db8::1]",
// "[2001:db8::1]:443", surrounded by optional spaces. Zones are dropped and
// IPv4-mapped IPv6 addresses unmapped.
func ParseIP(s string) (netip.Addr, bool) {
	s = trimSpace(s)
	if s == "" {
		return netip.Addr{}, false
	}
	var a netip.Addr
	var err error
	switch colons := strings.Count(s, ":"); {
	case s[0] == '[' && s[len(s)-1] == ']':
		a, err = netip.ParseAddr(s[1 : len(s)-1])
		if err == nil && !a.Is6() {
			return netip.Addr{}, false
		}
	case s[0] == '[' || colons == 1:
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	default:
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}
