package gateway

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRedisSettingsFollowThePluginsRedisSection(t *testing.T) {
	s := readRedisSettings([]byte(`{"redis":{"service_name":"r","timeout":250,"username":"u","password":"p","database":3}}`))
	assert.Equal(t, redisSettings{timeout: 250 * time.Millisecond, username: "u", password: "p", database: 3}, s)
	s = readRedisSettings([]byte(`{"redis":{"service_name":"r"}}`))
	assert.Equal(t, redisSettings{timeout: time.Second}, s, "the plugin's defaults")
}
