// Package redistest runs a private redis-server (Start) or a private Redis
// Cluster (StartCluster) for tests and connects the proxy-wasm host
// emulator's Redis callouts to it, so plugin tests run the real Lua scripts
// on a real Redis.
//
// Servers listen on free loopback ports chosen at run time, keep no data on
// disk and are stopped when the test ends. When redis-server (or, for a
// cluster, redis-cli) is not installed the test fails, saying how to install
// it: it never skips.
package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tidwall/resp"
)

// TB is what the fixtures need of their user: a *testing.T or *testing.B,
// or the benchmark report (a program, tools/benchreport), which stops at
// the first failure. It is testing.TB's methods the fixtures and testify's
// require call.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	FailNow()
	Cleanup(func())
	TempDir() string
}

// Backend is where a test sends the plugin's Redis calls: one Server or a
// Cluster.
type Backend interface {
	// Answer forwards every Redis call pending for the HTTP context and hands
	// the replies to the plugin; it returns how many it answered.
	Answer(host proxytest.HostEmulator, contextID uint32) int
	// Forward sends one query the plugin made and returns the raw reply.
	Forward(query []byte) []byte
	// Do sends one command of the test's own and returns the reply.
	Do(args ...string) resp.Value
	// Int sends one command whose reply is a number (nil: 0).
	Int(args ...string) int64
	// Keys lists the keys matching a pattern.
	Keys(pattern string) []string
	// SetClock sets the time the limiter's script calls run at (0: Redis's).
	SetClock(seconds float64)
	// Clock returns the time SetClock set.
	Clock() float64
	// Now returns Redis's clock, in seconds.
	Now() int64
	// AvoidWindowEdge waits past a window's end when it is near.
	AvoidWindowEdge(window, margin int64)
}

var (
	_ Backend = (*Server)(nil)
	_ Backend = (*Cluster)(nil)
)

// Server is one running redis-server and a connection to it.
type Server struct {
	Addr string
	clock
	n        node
	recorded *[][]byte // the queries Forward sent since Record (nil: not recording)
}

// clock is the time a backend puts into the limiter's script calls.
type clock struct {
	seconds float64 // 0: Redis's own
}

// SetClock makes the limiter's script calls that Forward passes on run at
// the given time, in seconds (0: Redis's own clock again). The plugin never
// gives a time: Forward puts it in the script's time argument, which the
// scripts read before Redis's TIME, so tests move through windows and lease
// expiries without sleeping.
func (c *clock) SetClock(seconds float64) { c.seconds = seconds }

// StartOver empties the server and runs the limiter's script calls at the
// given second until the test ends (then on Redis's clock again): a test
// whose resets and windows are exact.
func (s *Server) StartOver(tb TB, seconds float64) {
	tb.Helper()
	s.Do("FLUSHALL")
	s.SetClock(seconds)
	tb.Cleanup(func() { s.SetClock(0) })
}

// Clock returns the time SetClock set.
func (c *clock) Clock() float64 { return c.seconds }

// setTime puts the test clock in a script call's time argument, the one
// after the operation, when the call leaves it empty; it reports whether it
// changed args.
func (c *clock) setTime(args []resp.Value) bool {
	if c.seconds == 0 || len(args) < 3 {
		return false
	}
	if cmd := strings.ToUpper(args[0].String()); cmd != "EVALSHA" && cmd != "EVAL" {
		return false
	}
	at := 4 + args[2].Integer() // command, script, key count, keys, operation
	if at >= len(args) || args[at].String() != "" {
		return false
	}
	args[at] = resp.StringValue(strconv.FormatFloat(c.seconds, 'f', -1, 64))
	return true
}

// withClock returns the query with the test clock in its time argument (see
// setTime). The query is parsed only when a clock is set: most tests run
// thousands of calls on Redis's own.
func (c *clock) withClock(tb TB, query []byte) []byte {
	if c.seconds == 0 {
		return query
	}
	args, ok := parseQuery(query)
	if !ok || !c.setTime(args) {
		return query
	}
	return encode(tb, args)
}

// parseQuery decodes a query into its arguments.
func parseQuery(query []byte) ([]resp.Value, bool) {
	v, _, err := resp.NewReader(bytes.NewReader(query)).ReadValue()
	if err != nil || v.Type() != resp.Array {
		return nil, false
	}
	return v.Array(), true
}

// encode encodes arguments as a RESP command.
func encode(tb TB, args []resp.Value) []byte {
	out, err := resp.ArrayValue(args).MarshalRESP()
	if err != nil {
		tb.Fatalf("encoding a query: %v", err)
	}
	return out
}

// command encodes a command given as strings.
func command(tb TB, args ...string) []byte {
	vals := make([]resp.Value, len(args))
	for i, a := range args {
		vals[i] = resp.StringValue(a)
	}
	return encode(tb, vals)
}

// Start starts a redis-server on a free loopback port; it stops at the end
// of the test.
func Start(tb TB) *Server {
	tb.Helper()
	bin := redisServer(tb)
	s := &Server{n: node{tb: tb, bin: bin}}
	tb.Cleanup(s.Stop) // before it starts: the process is killed even if it never answers
	s.start(freePorts(tb, 1)[0])
	return s
}

// redisServer returns the path of redis-server, or fails the test.
func redisServer(tb TB) string {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatalf("redis-server is not installed; the tests run the real Lua scripts on a real Redis. " +
			"Install it with `apt-get install -y redis-server` (Debian/Ubuntu) and run the tests again")
	}
	return bin
}

// freePorts finds n distinct free loopback ports, holding each until all are
// found so that none is given twice.
func freePorts(tb TB, n int) []int {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatalf("finding a free port: %v", err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}

func (s *Server) start(port int) {
	s.n.tb.Helper()
	s.n.start(port, s.n.tb.TempDir())
	s.Addr = s.n.addr
}

// node is one redis-server process and a connection to it.
type node struct {
	tb   TB
	bin  string
	args []string // redis-server arguments besides the address, persistence and directory
	addr string
	cmd  *exec.Cmd
	conn net.Conn
	rd   *resp.Reader
}

// start runs redis-server on the port, with its files in dir, and connects
// to it.
func (n *node) start(port int, dir string) {
	n.tb.Helper()
	n.addr = "127.0.0.1:" + strconv.Itoa(port)
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning"}, n.args...)
	n.cmd = exec.Command(n.bin, args...)
	if err := n.cmd.Start(); err != nil {
		n.tb.Fatalf("starting redis-server: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err == nil {
			n.conn, n.rd = conn, resp.NewReader(bufio.NewReader(conn))
			if v := n.do("PING"); v.String() == "PONG" {
				return
			}
		}
		if time.Now().After(deadline) {
			n.tb.Fatalf("redis-server did not answer on %s within 5 s: %v", n.addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the process (idempotent).
func (n *node) stop() {
	if n.conn != nil {
		n.conn.Close()
		n.conn = nil
	}
	if n.cmd != nil && n.cmd.Process != nil {
		n.cmd.Process.Kill()
		n.cmd.Wait()
		n.cmd = nil
	}
}

// do sends one command and returns the reply.
func (n *node) do(args ...string) resp.Value {
	n.tb.Helper()
	return n.roundTrip(command(n.tb, args...))
}

// roundTrip sends raw RESP and reads one reply; Redis error replies are
// values, transport errors fail the test.
func (n *node) roundTrip(raw []byte) resp.Value {
	n.tb.Helper()
	if n.conn == nil {
		n.tb.Fatalf("redis-server at %s is stopped", n.addr)
	}
	n.conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := n.conn.Write(raw); err != nil {
		n.tb.Fatalf("writing to redis: %v", err)
	}
	v, _, err := n.rd.ReadValue()
	if err != nil {
		n.tb.Fatalf("reading from redis: %v", err)
	}
	return v
}

// now reads the node's clock, in seconds.
func (n *node) now() int64 {
	n.tb.Helper()
	t, err := strconv.ParseInt(n.do("TIME").Array()[0].String(), 10, 64)
	if err != nil {
		n.tb.Fatalf("TIME: %v", err)
	}
	return t
}

// Stop stops the server (idempotent).
func (s *Server) Stop() { s.n.stop() }

// Hang stops the server's process (SIGSTOP) as a hung Redis: connections
// stay open and commands are read by nobody until Resume, when Redis runs
// them all and answers. The test's own calls (Do, Int…) wait too.
func (s *Server) Hang() { s.n.signal(syscall.SIGSTOP) }

// Resume lets a hung server run again (SIGCONT).
func (s *Server) Resume() { s.n.signal(syscall.SIGCONT) }

func (n *node) signal(sig syscall.Signal) {
	n.tb.Helper()
	if n.cmd == nil || n.cmd.Process == nil {
		n.tb.Fatalf("redis-server at %s is stopped", n.addr)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		n.tb.Fatalf("redis-server at %s: %v: %v", n.addr, sig, err)
	}
}

// Restart stops the server and starts a new, empty one on the same port, as a
// Redis restart without persistence looks to the gateway: data and script
// cache are gone.
func (s *Server) Restart() {
	s.n.tb.Helper()
	port, _ := strconv.Atoi(s.Addr[strings.LastIndexByte(s.Addr, ':')+1:])
	s.Stop()
	s.start(port)
}

// Do sends one command and returns the reply; Redis error replies are
// returned as values (Type() == resp.Error), transport errors fail the test.
func (s *Server) Do(args ...string) resp.Value {
	s.n.tb.Helper()
	return s.n.do(args...)
}

// Int sends one command whose reply is an integer (or a number in a bulk
// string, or nil as 0), and returns it.
func (s *Server) Int(args ...string) int64 {
	s.n.tb.Helper()
	return toInt(s.n.tb, args, s.Do(args...))
}

// toInt reads a reply as a number (nil: 0), or fails the test.
func toInt(tb TB, args []string, v resp.Value) int64 {
	tb.Helper()
	if v.Type() == resp.Error {
		tb.Fatalf("%v: %v", args, v.Error())
	}
	if v.IsNull() {
		return 0
	}
	n, err := strconv.ParseInt(v.String(), 10, 64)
	if err != nil {
		tb.Fatalf("%v: not a number: %q", args, v.String())
	}
	return n
}

// Forward sends one query the plugin made, as the gateway would, and returns
// the raw reply to hand back to the plugin.
func (s *Server) Forward(query []byte) []byte {
	s.n.tb.Helper()
	query = s.withClock(s.n.tb, query)
	if s.recorded != nil {
		*s.recorded = append(*s.recorded, slices.Clone(query))
	}
	return marshal(s.n.tb, s.n.roundTrip(query))
}

// Record keeps a copy of every query Forward sends from now on, as sent,
// until the returned function is called; that returns them, for Replay.
func (s *Server) Record() (stop func() [][]byte) {
	var queries [][]byte
	s.recorded = &queries
	return func() [][]byte {
		s.recorded = nil
		return queries
	}
}

// Replay sends recorded queries again, in their order, batch at a time
// (pipelined: Redis runs each batch back to back, as it does at capacity,
// with no wait for a client between them), and fails on an error reply.
func (s *Server) Replay(queries [][]byte, batch int) {
	s.n.tb.Helper()
	for len(queries) > 0 {
		k := min(batch, len(queries))
		var raw []byte
		for _, q := range queries[:k] {
			raw = append(raw, q...)
		}
		s.n.conn.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := s.n.conn.Write(raw); err != nil {
			s.n.tb.Fatalf("writing to redis: %v", err)
		}
		for range k {
			v, _, err := s.n.rd.ReadValue()
			if err != nil {
				s.n.tb.Fatalf("reading from redis: %v", err)
			}
			if v.Type() == resp.Error {
				s.n.tb.Fatalf("a replayed query failed: %v", v.Error())
			}
		}
		queries = queries[k:]
	}
}

// marshal encodes a reply to hand back to the plugin.
func marshal(tb TB, v resp.Value) []byte {
	raw, err := v.MarshalRESP()
	if err != nil {
		tb.Fatalf("encoding the reply: %v", err)
	}
	return raw
}

// Answer answers every Redis call the plugin has pending for the HTTP context,
// including calls made while answering (a NOSCRIPT retry), by forwarding it to
// this server. It returns how many calls it answered. When the server is
// stopped, calls are answered with a failed status, as the gateway does.
func (s *Server) Answer(host proxytest.HostEmulator, contextID uint32) int {
	s.n.tb.Helper()
	return answer(s.n.tb, host, contextID, func([]byte) bool { return s.n.conn != nil }, s.Forward)
}

// answer answers the pending calls of a context one by one with forward, or
// with a failed status when up says the backend that would answer the query
// is down, until none is left.
func answer(tb TB, host proxytest.HostEmulator, contextID uint32, up func(query []byte) bool, forward func([]byte) []byte) int {
	tb.Helper()
	n := 0
	for ; n < 100; n++ {
		pending := host.GetRedisCalloutAttributesFromContext(contextID)
		if len(pending) == 0 {
			return n
		}
		call := pending[0]
		if !up(call.Query) {
			host.CallOnRedisCallResponse(call.CalloutID, 1, nil)
			continue
		}
		host.CallOnRedisCallResponse(call.CalloutID, 0, forward(call.Query))
	}
	tb.Fatalf("more than %d Redis calls pending for context %d: the plugin is looping", n, contextID)
	return n
}

// Keys lists the keys matching a pattern, sorted by Redis's order.
func (s *Server) Keys(pattern string) []string {
	s.n.tb.Helper()
	return strs(s.Do("KEYS", pattern))
}

// Strings sends one command whose reply is an array, and returns its
// elements as strings.
func (s *Server) Strings(args ...string) []string {
	s.n.tb.Helper()
	return strs(s.Do(args...))
}

// strs returns the elements of an array reply as strings.
func strs(v resp.Value) []string {
	var out []string
	for _, e := range v.Array() {
		out = append(out, e.String())
	}
	return out
}

// String renders the server for messages.
func (s *Server) String() string { return fmt.Sprintf("redis-server on %s", s.Addr) }

// Now returns Redis's clock, in seconds.
func (s *Server) Now() int64 {
	s.n.tb.Helper()
	return s.n.now()
}

// AvoidWindowEdge waits, when Redis's clock is within margin seconds of the
// end of a window of the given length, until the next window has begun, so a
// test that makes several calls sees them all land in one window.
func (s *Server) AvoidWindowEdge(window, margin int64) {
	s.n.tb.Helper()
	avoidWindowEdge(s.Now(), window, margin)
}

func avoidWindowEdge(now, window, margin int64) {
	if left := window - now%window; left <= margin {
		time.Sleep(time.Duration(left)*time.Second + 100*time.Millisecond)
	}
}

// CommandStat is what INFO commandstats says of one command since the last
// CONFIG RESETSTAT: its calls, and the microseconds Redis ran them (a
// script's include the commands it ran, which are counted too).
type CommandStat struct {
	Calls, Usec int64
}

// CommandStats reads INFO commandstats, by lower-case command name.
func (s *Server) CommandStats() map[string]CommandStat {
	s.n.tb.Helper()
	stats := map[string]CommandStat{}
	for _, line := range strings.Split(s.Do("INFO", "commandstats").String(), "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		cmd, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var stat CommandStat
		for _, field := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(field, "=")
			x, err := strconv.ParseInt(v, 10, 64)
			switch {
			case k != "calls" && k != "usec":
			case err != nil:
				s.n.tb.Fatalf("INFO commandstats: %q", line)
			case k == "calls":
				stat.Calls = x
			default:
				stat.Usec = x
			}
		}
		stats[cmd] = stat
	}
	return stats
}
