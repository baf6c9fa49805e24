package plugintest

// RedisSection is the redis field of a test configuration: the emulator's
// Redis callouts go to the real redis-server whatever the name.
const RedisSection = `"redis": {"service_name": "redis.static", "timeout": 1000}`

// APIKeyConfig limits the x-api-key header value sk-1 to a daily budget.
func APIKeyConfig(extra string, limits string) string {
	return `{"rule_name": "chat", ` + extra + `
		"rule_items": [{"limit_by_header": "x-api-key", "limit_keys": [{"key": "sk-1", ` + limits + `}]}],
		` + RedisSection + `}`
}

// APIKeySubject is the Redis subject of APIKeyConfig's key.
const APIKeySubject = "atrl:{chat|limit_by_header|x-api-key|sk-1}"

// APIKey is the request header that sends APIKeyConfig's key.
var APIKey = [2]string{"x-api-key", "sk-1"}

// ReservationOn is the top-level field that turns token_reservation on.
const ReservationOn = `"token_reservation": {"enabled": true},`
