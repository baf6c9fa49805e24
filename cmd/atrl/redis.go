package main

// A small Redis client for the quota commands: one connection per node,
// one command at a time, each within the timeout. It follows Redis Cluster
// redirections itself (MOVED, ASK) so that the same commands work on a
// single Redis and on a cluster, as the plugin's own calls do through the
// gateway. Nothing but net and the resp package the plugin already uses.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// maxRedirects bounds the MOVED and ASK hops of one command: a slot moves
// once during a resharding, and more hops mean nodes that disagree.
const maxRedirects = 5

// redisOptions say where Redis is and how to log in.
type redisOptions struct {
	addr     string // host:port of the node to start from
	username string
	password string
	database int
	timeout  time.Duration // connecting, and each command's round trip
	// deadline, when not zero, is when every command must have been
	// answered, whatever is left of timeout: the end of an exporter's
	// scrape (-scrape-timeout).
	deadline time.Time
}

// redisClient talks to one Redis, or to the nodes of one Redis Cluster.
type redisClient struct {
	opts  redisOptions
	conns map[string]*redisConn
	// owner is the node each slot lives on, as MOVED replies and SCAN
	// taught it; commands for other slots go to the first node.
	owner map[uint16]string
	// cluster says masters found a Redis Cluster: a script call's keys
	// must then share a slot.
	cluster bool
}

// redisConn is one connection to one node.
type redisConn struct {
	addr     string
	conn     net.Conn
	br       *bufio.Reader
	rd       *resp.Reader
	timeout  time.Duration
	deadline time.Time // see redisOptions
}

// replyError is an error reply of Redis, from the node at addr.
type replyError struct {
	addr string
	msg  string
}

func (e *replyError) Error() string { return "redis " + e.addr + ": " + e.msg }

// isReplyError says whether err is an error reply whose message starts
// with prefix ("NOSCRIPT", "ERR This instance has cluster support disabled").
func isReplyError(err error, prefix string) bool {
	var r *replyError
	return errors.As(err, &r) && strings.HasPrefix(r.msg, prefix)
}

// dialRedis connects to the node of opts.addr, so that a wrong address or
// password is reported before anything else is done.
func dialRedis(opts redisOptions) (*redisClient, error) {
	c := &redisClient{opts: opts, conns: map[string]*redisConn{}, owner: map[uint16]string{}}
	if _, err := c.conn(opts.addr); err != nil {
		return nil, err
	}
	return c, nil
}

// Close closes every connection.
func (c *redisClient) Close() {
	for addr, n := range c.conns {
		n.conn.Close()
		delete(c.conns, addr)
	}
}

// conn returns the connection to the node at addr, connecting (and logging
// in) the first time.
func (c *redisClient) conn(addr string) (*redisConn, error) {
	if n, ok := c.conns[addr]; ok {
		return n, nil
	}
	n := &redisConn{addr: addr, timeout: c.opts.timeout, deadline: c.opts.deadline}
	raw, err := (&net.Dialer{Timeout: c.opts.timeout, Deadline: c.opts.deadline}).Dial("tcp", addr)
	if err != nil {
		return nil, n.netError(err)
	}
	n.conn, n.br = raw, bufio.NewReader(raw)
	n.rd = resp.NewReader(n.br)
	if err := n.login(c.opts); err != nil {
		raw.Close()
		return nil, err
	}
	c.conns[addr] = n
	return n, nil
}

// login authenticates (AUTH with a password, and the username when there
// is one: Redis 6 ACL users) and selects the database, as the gateway does
// with the plugin's redis settings. Without either, a PING: a server that
// wants a password says so plainly (NOAUTH), rather than refusing the
// first command for its length as it does before a login.
func (n *redisConn) login(opts redisOptions) error {
	if opts.password == "" && opts.database == 0 {
		_, err := n.do(redisCommand("PING"))
		return err
	}
	if opts.password != "" {
		args := []string{"AUTH", opts.password}
		if opts.username != "" {
			args = []string{"AUTH", opts.username, opts.password}
		}
		if _, err := n.do(redisCommand(args...)); err != nil {
			return fmt.Errorf("%w (AUTH as %s)", err, userName(opts.username))
		}
	}
	if opts.database != 0 {
		if _, err := n.do(redisCommand("SELECT", strconv.Itoa(opts.database))); err != nil {
			return fmt.Errorf("%w (SELECT %d: redis.database)", err, opts.database)
		}
	}
	return nil
}

func userName(u string) string {
	if u == "" {
		return "the default user"
	}
	return strconv.Quote(u)
}

// do sends one command and reads its reply; an error reply is a
// *replyError.
func (n *redisConn) do(cmd []byte) (resp.Value, error) {
	v, err := n.roundTrip(cmd)
	if err == nil && v.Type() == resp.Error {
		err = &replyError{addr: n.addr, msg: v.String()}
	}
	return v, err
}

// roundTrip sends one command and reads its reply, error replies included,
// within the timeout.
func (n *redisConn) roundTrip(cmd []byte) (resp.Value, error) {
	d := time.Now().Add(n.timeout)
	if !n.deadline.IsZero() && n.deadline.Before(d) {
		d = n.deadline
	}
	n.conn.SetDeadline(d)
	if _, err := n.conn.Write(cmd); err != nil {
		return resp.Value{}, n.netError(err)
	}
	// resp's reader takes a line that is not RESP for an inline command:
	// a server that is not Redis would be read as one.
	first, err := n.br.Peek(1)
	if err != nil {
		return resp.Value{}, n.netError(err)
	}
	if !strings.ContainsRune("+-:$*", rune(first[0])) {
		return resp.Value{}, fmt.Errorf("redis %s: the server does not speak RESP (it answered %q): is it Redis?", n.addr, peekLine(n.br))
	}
	v, _, err := n.rd.ReadValue()
	if err != nil {
		return resp.Value{}, n.netError(err)
	}
	return v, nil
}

// peekLine returns the start of what the server sent, for a message.
func peekLine(br *bufio.Reader) string {
	b, _ := br.Peek(min(br.Buffered(), 40))
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// netError is netError for this connection: a timeout at the deadline
// says so.
func (n *redisConn) netError(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() && !n.deadline.IsZero() && !time.Now().Before(n.deadline) {
		return fmt.Errorf("redis %s: no answer before the scrape's end (-scrape-timeout)", n.addr)
	}
	return netError(n.addr, err, n.timeout)
}

// netError says what went wrong talking to addr, briefly: "redis
// 127.0.0.1:6379: connection refused", without Go's "dial tcp" wrapping.
func netError(addr string, err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("redis %s: no answer within %v (-timeout)", addr, timeout)
	}
	var op *net.OpError
	if errors.As(err, &op) {
		err = op.Err
	}
	var sc *os.SyscallError
	if errors.As(err, &sc) {
		err = sc.Err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("redis %s: the server closed the connection", addr)
	}
	return fmt.Errorf("redis %s: %v", addr, err)
}

// do sends a command about key (nil: none; it goes to the first node) to
// the node serving key's slot, following redirections.
func (c *redisClient) do(key []byte, cmd []byte) (resp.Value, error) {
	addr := c.opts.addr
	slot := uint16(0)
	if key != nil {
		slot = cachekey.Slot(key)
		if a, ok := c.owner[slot]; ok {
			addr = a
		}
	}
	asking := false
	for hops := 0; ; hops++ {
		n, err := c.conn(addr)
		if err != nil {
			return resp.Value{}, err
		}
		if asking { // the slot is being migrated: the new node takes the command once asked
			if _, err := n.do(redisCommand("ASKING")); err != nil {
				return resp.Value{}, err
			}
		}
		v, err := n.do(cmd)
		kind, to, ok := redirection(err, n.addr)
		if !ok {
			return v, err
		}
		if hops == maxRedirects {
			return resp.Value{}, fmt.Errorf("%w (after %d redirections: the cluster's nodes disagree on who serves slot %d)", err, hops, slot)
		}
		if kind == "MOVED" && key != nil {
			c.owner[slot] = to
		}
		addr, asking = to, kind == "ASK"
	}
}

// redirection reads a "MOVED <slot> <host:port>" or "ASK <slot>
// <host:port>" reply from the node at from; a node that does not know its
// own host (":6380") is on from's.
func redirection(err error, from string) (kind, to string, ok bool) {
	var r *replyError
	if !errors.As(err, &r) {
		return "", "", false
	}
	f := strings.Fields(r.msg)
	if len(f) != 3 || f[0] != "MOVED" && f[0] != "ASK" {
		return "", "", false
	}
	i := strings.LastIndexByte(f[2], ':')
	if i < 0 {
		return "", "", false
	}
	host, port := f[2][:i], f[2][i+1:]
	if host == "" {
		host, _, _ = net.SplitHostPort(from)
	}
	return f[0], net.JoinHostPort(strings.Trim(host, "[]"), port), true
}

// run sends a script call about key (all of a call's keys share its
// slot): by digest, then by source when Redis does not have the script
// (after a restart or SCRIPT FLUSH; the source also caches it again).
func (c *redisClient) run(call scripts.Call, key []byte) (resp.Value, error) {
	v, err := c.do(key, call(false))
	if isReplyError(err, "NOSCRIPT") {
		v, err = c.do(key, call(true))
	}
	if scripts.RedisClock.Learn(err) { // this machine's clock is a calendar period off Redis's
		v, err = c.do(key, call(true))
	}
	return v, err
}

// masters returns the address of every master serving slots, from CLUSTER
// NODES, or the one node when Redis is not a cluster.
func (c *redisClient) masters() ([]string, error) {
	v, err := c.do(nil, redisCommand("CLUSTER", "NODES"))
	if isReplyError(err, "ERR This instance has cluster support disabled") {
		return []string{c.opts.addr}, nil
	}
	if err != nil {
		return nil, err
	}
	c.cluster = true
	masters := parseClusterNodes(v.String(), c.opts.addr)
	if len(masters) == 0 {
		return nil, fmt.Errorf("redis %s: CLUSTER NODES lists no master serving slots", c.opts.addr)
	}
	return masters, nil
}

// parseClusterNodes reads the masters that serve slots and are not failing
// from CLUSTER NODES: "<id> <ip:port@cport[,hostname]> <flags> <master>
// <ping> <pong> <epoch> <link> <slot>...". A node without an IP (a cluster
// of one that never met another) is on seed's host.
func parseClusterNodes(text, seed string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || !hasFlag(f[2], "master") || hasFlag(f[2], "fail") || hasFlag(f[2], "noaddr") || hasFlag(f[2], "handshake") {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		i := strings.LastIndexByte(addr, ':')
		if i < 0 {
			continue
		}
		host := addr[:i]
		if host == "" {
			host, _, _ = net.SplitHostPort(seed)
		}
		out = append(out, net.JoinHostPort(host, addr[i+1:]))
	}
	return out
}

func hasFlag(flags, flag string) bool {
	for _, f := range strings.Split(flags, ",") {
		if f == flag {
			return true
		}
	}
	return false
}

// redisCommand encodes a command as RESP.
func redisCommand(args ...string) []byte {
	b := strconv.AppendInt(append(make([]byte, 0, 64), '*'), int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = strconv.AppendInt(append(b, '$'), int64(len(a)), 10)
		b = append(append(append(b, '\r', '\n'), a...), '\r', '\n')
	}
	return b
}
