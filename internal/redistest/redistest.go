// Package redistest runs a private redis-server for tests and connects the
// proxy-wasm host emulator's Redis callouts to it, so plugin tests run the
// real Lua scripts on a real Redis.
//
// The server listens on a free loopback port chosen at run time, keeps no
// data on disk and is stopped when the test ends. When redis-server is not
// installed the test fails, saying how to install it: it never skips.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tidwall/resp"
)

// Server is one running redis-server and a connection to it.
type Server struct {
	Addr  string
	tb    testing.TB
	cmd   *exec.Cmd
	conn  net.Conn
	rd    *resp.Reader
	clock float64 // seconds; 0: Redis's own
}

// SetClock makes the limiter's script calls that Forward passes on run at
// the given time, in seconds (0: Redis's own clock again). The plugin never
// gives a time: Forward puts it in the script's time argument, which the
// scripts read before Redis's TIME, so tests move through windows and lease
// expiries without sleeping.
func (s *Server) SetClock(seconds float64) { s.clock = seconds }

// Clock returns the time SetClock set.
func (s *Server) Clock() float64 { return s.clock }

// withClock returns the query with the test clock in its time argument, the
// one after the operation, when it is a script call that leaves it empty.
func (s *Server) withClock(query []byte) []byte {
	if s.clock == 0 {
		return query
	}
	v, _, err := resp.NewReader(bytes.NewReader(query)).ReadValue()
	args := v.Array()
	if err != nil || len(args) < 3 {
		return query
	}
	if cmd := strings.ToUpper(args[0].String()); cmd != "EVALSHA" && cmd != "EVAL" {
		return query
	}
	at := 4 + args[2].Integer() // command, script, key count, keys, operation
	if at >= len(args) || args[at].String() != "" {
		return query
	}
	args[at] = resp.StringValue(strconv.FormatFloat(s.clock, 'f', -1, 64))
	out, err := resp.ArrayValue(args).MarshalRESP()
	if err != nil {
		s.tb.Fatalf("re-encoding a query: %v", err)
	}
	return out
}

// Start starts a redis-server on a free loopback port; it stops at the end
// of the test.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redis-server is not installed; the tests run the real Lua scripts on a real Redis. " +
			"Install it with `apt-get install -y redis-server` (Debian/Ubuntu) and run the tests again")
	}
	s := &Server{tb: tb}
	s.start(bin, freePort(tb))
	tb.Cleanup(s.Stop)
	return s
}

func freePort(tb testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("finding a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func (s *Server) start(bin string, port int) {
	s.tb.Helper()
	s.Addr = "127.0.0.1:" + strconv.Itoa(port)
	s.cmd = exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.tb.TempDir(), "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			s.conn, s.rd = conn, resp.NewReader(bufio.NewReader(conn))
			if v := s.Do("PING"); v.String() == "PONG" {
				return
			}
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server did not answer on %s within 5 s: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop stops the server (idempotent).
func (s *Server) Stop() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		s.cmd.Wait()
		s.cmd = nil
	}
}

// Restart stops the server and starts a new, empty one on the same port, as a
// Redis restart without persistence looks to the gateway: data and script
// cache are gone.
func (s *Server) Restart() {
	s.tb.Helper()
	port, _ := strconv.Atoi(s.Addr[strings.LastIndexByte(s.Addr, ':')+1:])
	s.Stop()
	bin, _ := exec.LookPath("redis-server")
	s.start(bin, port)
}

// Do sends one command and returns the reply; Redis error replies are
// returned as values (Type() == resp.Error), transport errors fail the test.
func (s *Server) Do(args ...string) resp.Value {
	s.tb.Helper()
	vals := make([]resp.Value, len(args))
	for i, a := range args {
		vals[i] = resp.StringValue(a)
	}
	raw, err := resp.ArrayValue(vals).MarshalRESP()
	if err != nil {
		s.tb.Fatalf("encoding %v: %v", args, err)
	}
	return s.roundTrip(raw)
}

// Int sends one command whose reply is an integer (or a number in a bulk
// string, or nil as 0), and returns it.
func (s *Server) Int(args ...string) int64 {
	s.tb.Helper()
	v := s.Do(args...)
	if v.Type() == resp.Error {
		s.tb.Fatalf("%v: %v", args, v.Error())
	}
	if v.IsNull() {
		return 0
	}
	n, err := strconv.ParseInt(v.String(), 10, 64)
	if err != nil {
		s.tb.Fatalf("%v: not a number: %q", args, v.String())
	}
	return n
}

// roundTrip sends raw RESP and reads one reply.
func (s *Server) roundTrip(raw []byte) resp.Value {
	s.tb.Helper()
	if s.conn == nil {
		s.tb.Fatalf("redis-server at %s is stopped", s.Addr)
	}
	s.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := s.conn.Write(raw); err != nil {
		s.tb.Fatalf("writing to redis: %v", err)
	}
	v, _, err := s.rd.ReadValue()
	if err != nil {
		s.tb.Fatalf("reading from redis: %v", err)
	}
	return v
}

// Forward sends one query the plugin made, as the gateway would, and returns
// the raw reply to hand back to the plugin.
func (s *Server) Forward(query []byte) []byte {
	s.tb.Helper()
	raw, err := s.roundTrip(s.withClock(query)).MarshalRESP()
	if err != nil {
		s.tb.Fatalf("encoding the reply: %v", err)
	}
	return raw
}

// Answer answers every Redis call the plugin has pending for the HTTP context,
// including calls made while answering (a NOSCRIPT retry), by forwarding it to
// this server. It returns how many calls it answered. When the server is
// stopped, calls are answered with a failed status, as the gateway does.
func (s *Server) Answer(host proxytest.HostEmulator, contextID uint32) int {
	s.tb.Helper()
	n := 0
	for ; n < 100; n++ {
		pending := host.GetRedisCalloutAttributesFromContext(contextID)
		if len(pending) == 0 {
			return n
		}
		call := pending[0]
		if s.conn == nil {
			host.CallOnRedisCallResponse(call.CalloutID, 1, nil)
			continue
		}
		host.CallOnRedisCallResponse(call.CalloutID, 0, s.Forward(call.Query))
	}
	s.tb.Fatalf("more than %d Redis calls pending for context %d: the plugin is looping", n, contextID)
	return n
}

// Keys lists the keys matching a pattern, sorted by Redis's order.
func (s *Server) Keys(pattern string) []string {
	s.tb.Helper()
	var keys []string
	for _, v := range s.Do("KEYS", pattern).Array() {
		keys = append(keys, v.String())
	}
	return keys
}

// String renders the server for messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr) }

// Now returns Redis's clock, in seconds.
func (s *Server) Now() int64 {
	s.tb.Helper()
	n, err := strconv.ParseInt(s.Do("TIME").Array()[0].String(), 10, 64)
	if err != nil {
		s.tb.Fatalf("TIME: %v", err)
	}
	return n
}

// AvoidWindowEdge waits, when Redis's clock is within margin seconds of the
// end of a window of the given length, until the next window has begun, so a
// test that makes several calls sees them all land in one window.
func (s *Server) AvoidWindowEdge(window, margin int64) {
	s.tb.Helper()
	if left := window - s.Now()%window; left <= margin {
		time.Sleep(time.Duration(left)*time.Second + 100*time.Millisecond)
	}
}
