package gateway

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tokenlimit/ai-token-ratelimit/internal/redistest"
)

// query encodes a command in RESP, as the plugin sends its calls.
func query(args ...string) []byte {
	q := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		q = append(q, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return q
}

func TestRedisClientForwardsQueriesAndReplies(t *testing.T) {
	redis := redistest.Start(t)
	c := newRedisClient(redis.Addr, redisSettings{timeout: time.Second})
	defer c.close()

	reply, err := c.do(query("SET", "k", "v"))
	require.NoError(t, err)
	assert.Equal(t, "+OK\r\n", string(reply))
	reply, err = c.do(query("GET", "k"))
	require.NoError(t, err)
	assert.Equal(t, "$1\r\nv\r\n", string(reply))
	reply, err = c.do(query("EVALSHA", "0000000000000000000000000000000000000000", "0"))
	require.NoError(t, err, "an error reply is a reply: the plugin reads it")
	assert.Contains(t, string(reply), "-NOSCRIPT")
	reply, err = c.do(query("EVAL", "return {1, 'a', {2}}", "0"))
	require.NoError(t, err)
	assert.Equal(t, "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n", string(reply))
	assert.NoError(t, c.ping())
}

func TestRedisClientSurvivesARestartWithoutAFailedCall(t *testing.T) {
	redis := redistest.Start(t)
	c := newRedisClient(redis.Addr, redisSettings{timeout: time.Second})
	defer c.close()
	// Fill the pool with several connections, as concurrent calls do.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.do(query("EVAL", "redis.call('TIME') return 1", "0"))
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	require.NotEmpty(t, c.idle)

	redis.Restart() // every pooled connection is now closed by the old server
	reply, err := c.do(query("PING"))
	require.NoError(t, err)
	assert.Equal(t, "+PONG\r\n", string(reply))
}

func TestRedisClientFailsWhenRedisIsDownOrSilent(t *testing.T) {
	redis := redistest.Start(t)
	addr := redis.Addr
	redis.Stop()
	c := newRedisClient(addr, redisSettings{timeout: 300 * time.Millisecond})
	_, err := c.do(query("PING"))
	assert.Error(t, err, "nothing listens")

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn) // accepted, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, conn := range conns {
			conn.Close()
		}
	}()
	c = newRedisClient(l.Addr().String(), redisSettings{timeout: 300 * time.Millisecond})
	start := time.Now()
	_, err = c.do(query("PING"))
	took := time.Since(start)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "a timeout, got %v", err)
	assert.GreaterOrEqual(t, took, 290*time.Millisecond)
	assert.Less(t, took, 2*time.Second)
}

func TestRedisClientLogsInAndSelectsTheDatabase(t *testing.T) {
	redis := redistest.Start(t)
	redis.Do("SELECT", "2")
	redis.Do("SET", "where", "db2")
	redis.Do("CONFIG", "SET", "requirepass", "s3cret")
	redis.Do("AUTH", "s3cret")

	c := newRedisClient(redis.Addr, redisSettings{timeout: time.Second, password: "s3cret", database: 2})
	reply, err := c.do(query("GET", "where"))
	require.NoError(t, err)
	assert.Equal(t, "$3\r\ndb2\r\n", string(reply))
	c.close()

	c = newRedisClient(redis.Addr, redisSettings{timeout: time.Second, password: "wrong"})
	_, err = c.do(query("PING"))
	assert.ErrorContains(t, err, "redis AUTH refused")
	c = newRedisClient(redis.Addr, redisSettings{timeout: time.Second, username: "default", password: "s3cret"})
	assert.NoError(t, c.ping(), "AUTH with a user name (Redis 6 ACL)")
	c.close()
}
