package redistest

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
	"github.com/tidwall/resp"

	"github.com/tokenlimit/ai-token-ratelimit/cachekey"
)

// clusterNodes is how many masters a Cluster has: enough for subjects to
// land on different nodes, few enough to start in about a second.
const clusterNodes = 3

// maxRedirects bounds the MOVED/ASK hops one query may take.
const maxRedirects = 5

// Cluster is a running Redis Cluster of three masters (no replicas), and a
// client for it that routes each query by the hash slot of its keys, as a
// gateway's Redis Cluster client does. Forward checks the property plugins
// rely on: every call keeps its keys in one hash slot.
type Cluster struct {
	// Addrs are the masters' addresses, in the order their slots run:
	// Addrs[0] serves slots 0-5460, Addrs[1] 5461-10922, Addrs[2] 10923-16383.
	Addrs []string
	clock
	tb    TB
	nodes []*node
	ids   map[*node]string // cluster node ids
	// owner is the node each slot is believed to live on; nil: unknown, and
	// the query goes to the first node, which answers MOVED when it does not
	// serve the slot. It starts empty, like a client that only knows one seed
	// node, so redirections are exercised from the first call.
	owner   [cachekey.Slots]*node
	calls   []Call
	stopped bool
	// failing are the slots of the nodes whose calls fail (Fail).
	failing [cachekey.Slots]bool
}

// Call is one query the plugin made, as Forward passed it on.
type Call struct {
	Command string   // EVALSHA, EVAL, ...
	Keys    []string // its keys (a script's KEYS)
	Args    []string // the arguments after the keys (a script's ARGV, as the plugin sent it)
	Slot    int      // the slot of its keys; -1 when it has none
	Node    string   // the address of the node that answered it
	Moved   int      // MOVED redirections it followed
	Asked   int      // ASK redirections it followed
	Reply   resp.Value
}

// Op is a limiter script call's operation (admit, charge, renew): its first
// argument after the keys.
func (c Call) Op() string {
	if len(c.Args) == 0 {
		return ""
	}
	return c.Args[0]
}

// StartCluster starts a Redis Cluster of three masters on free loopback
// ports, with their cluster files in the test's temporary directory, and
// waits until every node says the cluster is ok; the nodes stop at the end of
// the test.
func StartCluster(tb TB) *Cluster {
	tb.Helper()
	bin := redisServer(tb)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		tb.Fatalf("redis-cli is not installed; it joins the test's redis-servers into a cluster. " +
			"Install it with `apt-get install -y redis-tools` (Debian/Ubuntu; it also comes with redis-server) and run the tests again")
	}
	c := &Cluster{tb: tb, ids: map[*node]string{}}
	tb.Cleanup(c.Stop)
	// A cluster node also listens on a bus port, by default its port + 10000,
	// which may be taken or past 65535: each gets a free one of its own.
	ports := freePorts(tb, 2*clusterNodes)
	for i := 0; i < clusterNodes; i++ {
		dir := tb.TempDir()
		n := &node{tb: tb, bin: bin, args: []string{"--cluster-enabled", "yes",
			"--cluster-port", strconv.Itoa(ports[clusterNodes+i]),
			"--cluster-config-file", filepath.Join(dir, "nodes.conf")}}
		c.nodes = append(c.nodes, n) // before it starts: Stop kills it if it never answers
		n.start(ports[i], dir)
		c.Addrs = append(c.Addrs, n.addr)
		c.ids[n] = n.do("CLUSTER", "MYID").String()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append(append([]string{"--cluster", "create"}, c.Addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		tb.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	c.waitUntilOK(10 * time.Second)
	return c
}

// waitUntilOK waits until every node reports cluster_state:ok.
func (c *Cluster) waitUntilOK(limit time.Duration) {
	c.tb.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok := true
		for _, n := range c.nodes {
			ok = ok && strings.Contains(n.do("CLUSTER", "INFO").String(), "cluster_state:ok")
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("the Redis Cluster on %v was not ok within %v", c.Addrs, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops every node (idempotent). Calls are then answered with a failed
// status, as the gateway does.
func (c *Cluster) Stop() {
	c.stopped = true
	for _, n := range c.nodes {
		n.stop()
	}
}

// Answer answers every Redis call the plugin has pending for the HTTP
// context, including calls made while answering (a NOSCRIPT retry), with
// Forward. It returns how many calls it answered.
func (c *Cluster) Answer(host proxytest.HostEmulator, contextID uint32) int {
	c.tb.Helper()
	return answer(c.tb, host, contextID, c.up, c.Forward)
}

// up says whether the node that serves a query's slot answers it: the
// cluster runs, and the node is not failing (Fail).
func (c *Cluster) up(query []byte) bool {
	if c.stopped {
		return false
	}
	args, ok := parseQuery(query)
	if !ok || len(args) == 0 {
		return true // Forward fails the test
	}
	keys, _ := c.keysOf(args)
	return len(keys) == 0 || !c.failing[cachekey.Slot([]byte(keys[0]))]
}

// Fail makes the calls Answer passes on to the node serving a key's slot
// fail, as the gateway answers them when that node is unreachable (down,
// being failed over, cut off): with a failed status, and Redis runs none of
// them. The returned function makes them go through again. The test's own
// commands (Do, Keys...) still reach the node.
func (c *Cluster) Fail(key string) (back func()) {
	c.tb.Helper()
	addr := c.Owner(key)
	var slots []int
	for _, r := range c.anyNode().do("CLUSTER", "SLOTS").Array() {
		a := r.Array()
		if m := a[2].Array(); fmt.Sprintf("%s:%d", m[0].String(), m[1].Integer()) == addr {
			for s := a[0].Integer(); s <= a[1].Integer(); s++ {
				slots = append(slots, s)
			}
		}
	}
	for _, s := range slots {
		c.failing[s] = true
	}
	return func() {
		for _, s := range slots {
			c.failing[s] = false
		}
	}
}

// Forward sends one query the plugin made to the node serving the slot of
// its keys, following redirections, records it (Calls) and returns the raw
// reply. A query whose keys are in more than one slot fails the test: a
// cluster refuses it (CROSSSLOT), so a plugin that sends one does not work on
// a Redis Cluster. It is still sent, and the plugin gets the refusal.
func (c *Cluster) Forward(query []byte) []byte {
	c.tb.Helper()
	args, ok := parseQuery(query)
	if !ok || len(args) == 0 {
		c.tb.Fatalf("the plugin sent a query that is not a RESP command: %.80q", query)
	}
	keys, rest := c.keysOf(args)
	call := Call{Command: strings.ToUpper(args[0].String()), Keys: keys, Args: rest, Slot: -1}
	if len(keys) > 0 {
		call.Slot = int(cachekey.Slot([]byte(keys[0])))
	}
	if slots := slotsOf(keys); len(slots) > 1 {
		c.tb.Errorf("the plugin sent a call (%s) whose keys are in %d hash slots %v, which a Redis Cluster refuses: keys %q",
			call.Command, len(slots), slots, keys)
	}
	if c.setTime(args) {
		query = encode(c.tb, args)
	}
	v, n, moved, asked := c.route(query, call.Slot)
	call.Node, call.Moved, call.Asked, call.Reply = n.addr, moved, asked, v
	c.calls = append(c.calls, call)
	return marshal(c.tb, v)
}

// Calls returns every query Forward passed on, in order.
func (c *Cluster) Calls() []Call { return append([]Call(nil), c.calls...) }

// keysOf returns a command's keys and the arguments after them (scripts), or
// every argument after the command (other commands, whose keys Redis names).
func (c *Cluster) keysOf(args []resp.Value) (keys, rest []string) {
	c.tb.Helper()
	cmd := strings.ToUpper(args[0].String())
	if cmd == "EVALSHA" || cmd == "EVAL" {
		if len(args) < 3 {
			return nil, nil
		}
		n := args[2].Integer()
		if n < 0 || 3+n > len(args) {
			return nil, nil // the node answers the error
		}
		for _, a := range args[3 : 3+n] {
			keys = append(keys, a.String())
		}
		for _, a := range args[3+n:] {
			rest = append(rest, a.String())
		}
		return keys, rest
	}
	for _, a := range args[1:] {
		rest = append(rest, a.String())
	}
	v := c.anyNode().roundTrip(encode(c.tb, append([]resp.Value{resp.StringValue("COMMAND"), resp.StringValue("GETKEYS")}, args...)))
	if v.Type() == resp.Error { // no keys (FLUSHALL, TIME, SCRIPT LOAD...)
		return nil, rest
	}
	return strs(v), rest
}

// slotsOf returns the distinct slots of keys.
func slotsOf(keys []string) []uint16 {
	var slots []uint16
	for _, k := range keys {
		s := cachekey.Slot([]byte(k))
		if !containsSlot(slots, s) {
			slots = append(slots, s)
		}
	}
	return slots
}

func containsSlot(slots []uint16, s uint16) bool {
	for _, x := range slots {
		if x == s {
			return true
		}
	}
	return false
}

// running fails the test when the cluster was stopped.
func (c *Cluster) running() {
	c.tb.Helper()
	if c.stopped {
		c.tb.Fatalf("the Redis Cluster on %v is stopped", c.Addrs)
	}
}

// anyNode is the node for queries any node can answer.
func (c *Cluster) anyNode() *node {
	c.tb.Helper()
	c.running()
	return c.nodes[0]
}

// route sends a query to the node believed to serve the slot (-1: any) and
// follows MOVED (learning the slot's node) and ASK (a slot being migrated:
// ASKING, then the query, on the node named, once) until a node answers.
func (c *Cluster) route(query []byte, slot int) (v resp.Value, n *node, moved, asked int) {
	c.tb.Helper()
	n = c.anyNode()
	if slot >= 0 && c.owner[slot] != nil {
		n = c.owner[slot]
	}
	asking := false
	for hops := 0; hops <= maxRedirects; hops++ {
		if asking {
			if ok := n.do("ASKING"); ok.String() != "OK" {
				c.tb.Fatalf("ASKING on %s: %v", n.addr, ok)
			}
		}
		v = n.roundTrip(query)
		kind, to, addr := redirection(v)
		switch kind {
		case "MOVED":
			n, asking = c.node(addr), false
			c.owner[to] = n
			moved++
		case "ASK":
			n, asking = c.node(addr), true
			asked++
		default:
			return v, n, moved, asked
		}
	}
	c.tb.Fatalf("a query was redirected more than %d times (last reply %q)", maxRedirects, v.String())
	return v, n, moved, asked
}

// redirection parses "MOVED <slot> <addr>" and "ASK <slot> <addr>" replies.
func redirection(v resp.Value) (kind string, slot int, addr string) {
	if v.Type() != resp.Error {
		return "", 0, ""
	}
	f := strings.Fields(v.String())
	if len(f) != 3 || (f[0] != "MOVED" && f[0] != "ASK") {
		return "", 0, ""
	}
	slot, err := strconv.Atoi(f[1])
	if err != nil || slot < 0 || slot >= cachekey.Slots {
		return "", 0, ""
	}
	return f[0], slot, f[2]
}

// node returns the node with the address; any other address fails the test,
// so redirections never lead outside the cluster the test started.
func (c *Cluster) node(addr string) *node {
	c.tb.Helper()
	for _, n := range c.nodes {
		if n.addr == addr {
			return n
		}
	}
	c.tb.Fatalf("redirected to %s, which is not a node of the test's cluster %v", addr, c.Addrs)
	return nil
}

// ForgetSlots forgets which node serves which slot, as a client that only
// knows a seed node: the next query for a slot the first node does not
// serve is answered MOVED.
func (c *Cluster) ForgetSlots() { c.owner = [cachekey.Slots]*node{} }

// Do sends one command and returns the reply: a command with keys goes to
// the node serving their slot (keys in several slots: the node answers
// CROSSSLOT); one without keys (FLUSHALL, SCRIPT LOAD, CONFIG SET) goes to
// every node, and the first error, else the first node's reply, is returned.
// Redis error replies are values; transport errors fail the test.
func (c *Cluster) Do(args ...string) resp.Value {
	c.tb.Helper()
	vals := make([]resp.Value, len(args))
	for i, a := range args {
		vals[i] = resp.StringValue(a)
	}
	keys, _ := c.keysOf(vals)
	query := encode(c.tb, vals)
	if len(keys) > 0 {
		v, _, _, _ := c.route(query, int(cachekey.Slot([]byte(keys[0]))))
		return v
	}
	var first resp.Value
	c.running()
	for i, n := range c.nodes {
		v := n.roundTrip(query)
		if i == 0 || v.Type() == resp.Error && first.Type() != resp.Error {
			first = v
		}
	}
	return first
}

// DoOn sends one command to the node with the address, without following
// redirections: to look at what one node holds.
func (c *Cluster) DoOn(addr string, args ...string) resp.Value {
	c.tb.Helper()
	c.running()
	return c.node(addr).do(args...)
}

// Int sends one command whose reply is an integer (or a number in a bulk
// string, or nil as 0), and returns it.
func (c *Cluster) Int(args ...string) int64 {
	c.tb.Helper()
	return toInt(c.tb, args, c.Do(args...))
}

// Keys lists the keys matching a pattern on every node, sorted.
func (c *Cluster) Keys(pattern string) []string {
	c.tb.Helper()
	var keys []string
	c.running()
	for _, n := range c.nodes {
		keys = append(keys, strs(n.do("KEYS", pattern))...)
	}
	sort.Strings(keys)
	return keys
}

// Now returns Redis's clock (the first node's), in seconds.
func (c *Cluster) Now() int64 {
	c.tb.Helper()
	return c.anyNode().now()
}

// AvoidWindowEdge waits, when Redis's clock is within margin seconds of the
// end of a window of the given length, until the next window has begun.
func (c *Cluster) AvoidWindowEdge(window, margin int64) {
	c.tb.Helper()
	avoidWindowEdge(c.Now(), window, margin)
}

// Owner returns the address of the node serving a key's slot, as the cluster
// says (CLUSTER SLOTS), whatever the client believes.
func (c *Cluster) Owner(key string) string {
	c.tb.Helper()
	slot := int(cachekey.Slot([]byte(key)))
	for _, r := range c.anyNode().do("CLUSTER", "SLOTS").Array() {
		a := r.Array()
		if len(a) >= 3 && a[0].Integer() <= slot && slot <= a[1].Integer() {
			m := a[2].Array()
			return fmt.Sprintf("%s:%d", m[0].String(), m[1].Integer())
		}
	}
	c.tb.Fatalf("no node serves slot %d", slot)
	return ""
}

// MigrateSlot starts moving a key's slot to the node with the address, as a
// resharding does: while it is under way, the old node answers ASK for keys
// it does not have. The returned function finishes it: moves the keys left
// (MIGRATE) and gives the slot to the new node on every node, after which
// the old node answers MOVED.
func (c *Cluster) MigrateSlot(key, to string) (finish func()) {
	c.tb.Helper()
	slot := strconv.Itoa(int(cachekey.Slot([]byte(key))))
	src, dst := c.node(c.Owner(key)), c.node(to)
	if src == dst {
		c.tb.Fatalf("slot %s already lives on %s", slot, to)
	}
	mustOK := func(n *node, args ...string) {
		c.tb.Helper()
		if v := n.do(args...); v.String() != "OK" {
			c.tb.Fatalf("%v on %s: %v", args, n.addr, v)
		}
	}
	mustOK(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", c.ids[src])
	mustOK(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", c.ids[dst])
	return func() {
		c.tb.Helper()
		host, port, _ := strings.Cut(dst.addr, ":")
		for i := 0; ; i++ {
			keys := strs(src.do("CLUSTER", "GETKEYSINSLOT", slot, "100"))
			if len(keys) == 0 {
				break
			}
			if i == 1000 {
				c.tb.Fatalf("slot %s still has keys on %s after 1000 MIGRATE batches", slot, src.addr)
			}
			mustOK(src, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...)
		}
		// The new owner first, then the old one, then the others (see the
		// CLUSTER SETSLOT documentation).
		mustOK(dst, "CLUSTER", "SETSLOT", slot, "NODE", c.ids[dst])
		mustOK(src, "CLUSTER", "SETSLOT", slot, "NODE", c.ids[dst])
		for _, n := range c.nodes {
			if n != src && n != dst {
				mustOK(n, "CLUSTER", "SETSLOT", slot, "NODE", c.ids[dst])
			}
		}
	}
}
