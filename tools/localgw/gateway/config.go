package gateway

import (
	"time"

	"github.com/tidwall/gjson"
)

// redisSettings are the parts of the plugin's redis section that the
// gateway applies itself, as Envoy does for a Redis cluster: the plugin
// names a service, the gateway knows where it is.
type redisSettings struct {
	timeout            time.Duration
	username, password string
	database           int
}

// Defaults of the plugin's redis section (see the README's configuration table).
const defaultRedisTimeout = time.Second

func readRedisSettings(config []byte) redisSettings {
	r := gjson.GetBytes(config, "redis")
	s := redisSettings{
		timeout:  defaultRedisTimeout,
		username: r.Get("username").String(),
		password: r.Get("password").String(),
		database: int(r.Get("database").Int()),
	}
	if ms := r.Get("timeout").Int(); ms > 0 {
		s.timeout = time.Duration(ms) * time.Millisecond
	}
	return s
}
