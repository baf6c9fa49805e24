// Package scripts holds the limiter's Redis Lua scripts (the .lua files beside
// this one, embedded) and the Go that calls them: it encodes each call as one
// RESP command, sends it with EVALSHA (falling back to EVAL once when Redis
// answers NOSCRIPT, after a restart or a SCRIPT FLUSH), and decodes the reply.
// What the calls are about (subjects, amounts, verdicts) is package budget's.
package scripts

import (
	"bytes"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/budget"
)

var (
	//go:embed admit.lua
	admitSource string
	//go:embed charge.lua
	chargeSource string
	//go:embed renew.lua
	renewSource string
	//go:embed overrides.lua
	overridesSource string
	//go:embed status.lua
	statusSource string
	//go:embed manage.lua
	manageSource string
	//go:embed period.lua
	periodSource string
	//go:embed alerts.lua
	alertsSource string
	//go:embed alertbox.lua
	alertboxSource string
)

// Script is one Lua script and the SHA1 digest Redis caches it under.
type Script struct {
	Name   string
	Source string
	SHA1   string
}

// The operations of the limiter script, its first argument.
const (
	opAdmit  = "admit"  // admit.lua: check, and reserve when there is a cost
	opCharge = "charge" // charge.lua: add tokens (or give back), release leases
	opRenew  = "renew"  // renew.lua: extend leases

	opStatus   = "status"   // status.lua: what the subjects used, read only
	opReset    = "reset"    // manage.lua: clear windows
	opGrant    = "grant"    // manage.lua: give tokens back
	opOverride = "override" // manage.lua: set or remove a subject's limit overrides
)

// Limiter is the one script Redis runs: admit.lua, charge.lua and renew.lua
// side by side, chosen by the first argument. One script, because a charge is often
// sent as the stream ends, and the gateway drops the reply of a call whose
// stream has gone: a charge answered NOSCRIPT could never be retried. The
// admission before it always runs on a live stream, and loading the one
// script there loads the charge too.
//
// The prelude also reads the clock every operation uses: the time its first
// argument gives (tests), else Redis's own (production), with its
// microseconds, so that every gateway replica decides by one clock. It keeps
// the whole seconds (sec) and the fraction (frac) apart as well as their sum
// (now): a double near 2^31 s resolves only half a microsecond, and that
// error, times a sliding window's previous count, would tip decisions.
var Limiter = newScript("limiter", clockPrelude+periodSource+overridesSource+alertsSource+
	"local op = table.remove(ARGV, 1) -- "+opAdmit+", "+opCharge+" or "+opRenew+"\n"+
	"if op == '"+opAdmit+"' then\n"+admitSource+"\nelseif op == '"+opCharge+"' then\n"+chargeSource+
	"\nelse\n"+renewSource+"\nend\n")

// Quota is the script of the quota endpoints and the CLI: status.lua, read
// only, and manage.lua's operator changes, chosen by the first argument as
// in Limiter, with the same clock. Apart from Limiter, so that the calls on
// every request do not carry them: they are sent only when someone asks.
var Quota = newScript("quota", clockPrelude+periodSource+overridesSource+
	"local op = table.remove(ARGV, 1) -- "+opStatus+", "+opReset+", "+opGrant+" or "+opOverride+"\n"+
	"if op == '"+opStatus+"' then\n"+statusSource+"\nelse\n"+manageSource+"\nend\n")

// Alerts is the script that delivers budget alerts (alertbox.lua), with
// the same clock; apart from Limiter, as Quota is: sent from the plugin's
// tick only when alerts are configured.
var Alerts = newScript("alerts", clockPrelude+alertsSource+
	"local op = table.remove(ARGV, 1) -- list, scan, settle, claim or attach\n"+alertboxSource)

const clockPrelude = `local sec, frac = string.match(ARGV[2], '^(%d+)(%.?%d*)$') -- ARGV[1] is the operation, ARGV[2] the time given, if any
if sec then
  sec, frac = tonumber(sec), tonumber('0' .. frac)
else
  local t = redis.call('TIME')                                  -- Redis's clock: seconds, microseconds
  sec, frac = tonumber(t[1]), tonumber(t[2]) / 1e6
end
local now = sec + frac                                          -- to about 0.5 µs only, near 2^31 s: windows use sec and frac
`

func newScript(name, source string) *Script {
	sum := sha1.Sum([]byte(source))
	return &Script{Name: name, Source: source, SHA1: hex.EncodeToString(sum[:])}
}

// appendCall appends the head of one script call in RESP: the array header,
// EVALSHA and the digest (or EVAL and the source when bySource), the key count
// and the keys (one per subject, every counter of a subject being derived from
// its key; with relative, none for a subject sent as a suffix of the one
// before it, see budget.Subject.Suffix), and the operation. The caller appends
// exactly nargs more arguments.
func (s *Script) appendCall(dst []byte, bySource bool, op string, subjects []budget.Subject, relative bool, nargs int) []byte {
	return s.appendCallOf(dst, bySource, op, relative, nargs, subjects)
}

// appendCallOf is appendCall for the subjects of several lists, whose keys
// follow one another in KEYS (an admission with fallbacks: each candidate's
// subjects, see Client.AdmitFirst); a subject is relative only to the
// subject before it in its own list.
func (s *Script) appendCallOf(dst []byte, bySource bool, op string, relative bool, nargs int, lists ...[]budget.Subject) []byte {
	keys := 0
	for _, subjects := range lists {
		keys += len(subjects)
		if relative {
			for i := range subjects {
				if isRelative(subjects, i) {
					keys--
				}
			}
		}
	}
	dst = appendArrayHeader(dst, 4+keys+nargs)
	if bySource {
		dst = appendBulkString(dst, "EVAL")
		dst = appendBulkString(dst, s.Source)
	} else {
		dst = appendBulkString(dst, "EVALSHA")
		dst = appendBulkString(dst, s.SHA1)
	}
	dst = appendBulkInt(dst, int64(keys))
	for _, subjects := range lists {
		for i, subject := range subjects {
			if !relative || !isRelative(subjects, i) {
				dst = appendBulk(dst, subject.Key)
			}
		}
	}
	return appendBulkString(dst, op)
}

// isRelative says whether subject i is sent as a suffix of the subject
// before it: its Suffix says it ends with one, and what precedes the suffix
// is that subject's key.
func isRelative(subjects []budget.Subject, i int) bool {
	s := subjects[i]
	if i == 0 || s.Suffix <= 0 || s.Suffix >= len(s.Key) || s.Key[len(s.Key)-s.Suffix] != ':' {
		return false
	}
	return bytes.Equal(s.Key[:len(s.Key)-s.Suffix], subjects[i-1].Key)
}

func appendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulkString(dst []byte, s string) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

func appendBulk(dst []byte, b []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(b)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// appendBulkInt appends an integer as a bulk string, which is how script
// arguments travel.
func appendBulkInt(dst []byte, n int64) []byte {
	var digits [20]byte
	return appendBulk(dst, strconv.AppendInt(digits[:0], n, 10))
}
