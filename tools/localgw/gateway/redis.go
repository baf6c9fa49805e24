package gateway

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/tidwall/resp"
)

// maxIdleRedisConns is how many connections to Redis are kept open between calls.
const maxIdleRedisConns = 16

// redisClient sends the plugin's Redis calls, already encoded in RESP, to one
// Redis server and returns its replies re-encoded, as Envoy's Redis cluster
// does for proxy_redis_call. Every call, connecting included, has the
// timeout of the plugin's redis section.
type redisClient struct {
	addr     string
	settings redisSettings
	idle     chan *redisConn
}

func newRedisClient(addr string, s redisSettings) *redisClient {
	return &redisClient{addr: addr, settings: s, idle: make(chan *redisConn, maxIdleRedisConns)}
}

// redisConn is one connection and the reader of its replies; read counts
// the bytes received, to tell a connection that died idle from a call that
// failed half-way.
type redisConn struct {
	net.Conn
	rd   *resp.Reader
	read int64
}

func (c *redisConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read += int64(n)
	return n, err
}

// do sends one query and returns the raw reply. A Redis error reply (such
// as NOSCRIPT) is a reply, not an error: the plugin reads it.
func (c *redisClient) do(query []byte) ([]byte, error) {
	deadline := time.Now().Add(c.settings.timeout)
	conn, reused, err := c.get(deadline)
	if err != nil {
		return nil, err
	}
	reply, err := c.send(conn, query, deadline)
	// A pooled connection that Redis closed while it sat idle (it
	// restarted) fails before any byte comes back. Envoy would have dropped
	// it, and the others, when Redis closed them: do the same and send the
	// query once more on a new connection.
	if err != nil && reused && errors.Is(err, errClosedIdle) && time.Now().Before(deadline) {
		c.close()
		if conn, err = c.dial(deadline); err != nil {
			return nil, err
		}
		reply, err = c.send(conn, query, deadline)
	}
	return reply, err
}

// errClosedIdle: the connection was closed by Redis before the query got
// any answer.
var errClosedIdle = errors.New("connection closed by Redis")

// send sends a query on a connection and keeps the connection when it
// worked; it returns errClosedIdle (wrapping the cause) when the
// connection had been closed by Redis.
func (c *redisClient) send(conn *redisConn, query []byte, deadline time.Time) ([]byte, error) {
	before := conn.read
	reply, err := conn.roundTrip(query, deadline)
	if err == nil {
		c.put(conn)
		return reply, nil
	}
	conn.Close()
	if conn.read == before && closedByPeer(err) {
		return nil, fmt.Errorf("%w: %w", errClosedIdle, err)
	}
	return nil, err
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// get returns an idle connection, or a new one.
func (c *redisClient) get(deadline time.Time) (conn *redisConn, reused bool, err error) {
	select {
	case conn := <-c.idle:
		return conn, true, nil
	default:
	}
	conn, err = c.dial(deadline)
	return conn, false, err
}

// dial opens a connection, logged in and on the configured database.
func (c *redisClient) dial(deadline time.Time) (*redisConn, error) {
	raw, err := (&net.Dialer{Deadline: deadline}).Dial("tcp", c.addr)
	if err != nil {
		return nil, err
	}
	conn := &redisConn{Conn: raw}
	conn.rd = resp.NewReader(bufio.NewReader(conn))
	if err := conn.setUp(c.settings, deadline); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// put keeps a healthy connection for the next call.
func (c *redisClient) put(conn *redisConn) {
	select {
	case c.idle <- conn:
	default:
		conn.Close()
	}
}

// close closes the idle connections.
func (c *redisClient) close() {
	for {
		select {
		case conn := <-c.idle:
			conn.Close()
		default:
			return
		}
	}
}

// setUp logs in and selects the database, as the plugin's redis section asks.
func (c *redisConn) setUp(s redisSettings, deadline time.Time) error {
	var cmds [][]string
	if s.password != "" {
		if s.username != "" {
			cmds = append(cmds, []string{"AUTH", s.username, s.password})
		} else {
			cmds = append(cmds, []string{"AUTH", s.password})
		}
	}
	if s.database != 0 {
		cmds = append(cmds, []string{"SELECT", fmt.Sprint(s.database)})
	}
	for _, cmd := range cmds {
		vals := make([]resp.Value, len(cmd))
		for i, a := range cmd {
			vals[i] = resp.StringValue(a)
		}
		q, err := resp.ArrayValue(vals).MarshalRESP()
		if err != nil {
			return err
		}
		reply, err := c.roundTrip(q, deadline)
		if err != nil {
			return fmt.Errorf("redis %s: %w", cmd[0], err)
		}
		if reply[0] == '-' {
			return fmt.Errorf("redis %s refused: %s", cmd[0], reply[1:len(reply)-2])
		}
	}
	return nil
}

// roundTrip writes one query and reads one reply, re-encoded.
func (c *redisConn) roundTrip(query []byte, deadline time.Time) ([]byte, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if _, err := c.Write(query); err != nil {
		return nil, err
	}
	v, _, err := c.rd.ReadValue()
	if err != nil {
		return nil, err
	}
	return v.MarshalRESP()
}

// ping checks that Redis answers (logged in, on the right database).
func (c *redisClient) ping() error {
	reply, err := c.do([]byte("*1\r\n$4\r\nPING\r\n"))
	if err != nil {
		return err
	}
	if string(reply) != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", reply)
	}
	return nil
}
