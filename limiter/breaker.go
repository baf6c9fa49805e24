package limiter

import (
	"strconv"
	"time"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// The circuit breaker of each Redis endpoint, per worker: after
// redis.breaker_failures consecutive failed calls, admissions stop waiting
// on Redis (failure_mode decides them at once, with no round trip) until a
// probe sent from the tick gets an answer. Clients of the configurations
// (routes) that name the same endpoint share its breaker; the first
// configuration's breaker settings apply.

// Metric names of the breakers: per endpoint, not per route.
const (
	metricBreakerOpened = "token_ratelimit_breaker_open_count" // times a breaker opened
	metricBreakerOpenMs = "token_ratelimit_breaker_open_ms"    // milliseconds breakers were open
	// metricRedisLatency is a histogram of the time of the calls of the
	// plugin's scripts, admissions and charges, in milliseconds (see
	// scripts.Client.SetLatency).
	metricRedisLatency = "token_ratelimit_redis_latency_ms"
)

// endpointBreaker is one endpoint's breaker, the client that probes it
// (and asks it for the VM's number), its counters, and the VM's ids for
// it (ids.go).
type endpointBreaker struct {
	breaker   *scripts.Breaker
	prober    *scripts.Client
	opened    proxywasm.MetricCounter
	openMs    proxywasm.MetricCounter
	latency   *histogramTally // metricRedisLatency
	accounted time.Time       // up to when openMs counts the open time
	ids       *vmIDs
	numbering bool // the tick's call for the VM's number is out
}

// redisEndpointOf names a Redis endpoint: where it is, and as whom.
func redisEndpointOf(r config.Redis) string {
	return r.ServiceName + ":" + strconv.Itoa(r.ServicePort) + "/" + strconv.Itoa(r.Database) + "@" + r.Username
}

// endpointOf returns the breaker of a configuration's Redis endpoint, made
// on first use with its settings and client, with the VM's ids for it.
func (s *startState) endpointOf(r config.Redis, client *scripts.Client) *endpointBreaker {
	key := redisEndpointOf(r)
	if eb, ok := s.breakers[key]; ok {
		return eb
	}
	if s.breakers == nil {
		s.breakers = map[string]*endpointBreaker{}
	}
	name := "redis." + r.ServiceName + ".metric."
	eb := &endpointBreaker{
		breaker: scripts.NewBreaker(int(r.BreakerFailures), time.Duration(r.BreakerProbeMs)*time.Millisecond),
		prober:  client,
		opened:  defineCounter(name + metricBreakerOpened),
		openMs:  defineCounter(name + metricBreakerOpenMs),
		latency: newHistogramTally(name+metricRedisLatency, &s.tallies),
		ids:     idsOf(key),
	}
	eb.breaker.OnChange = func(open bool, openFor time.Duration, err error) {
		if open {
			eb.opened.Increment(1)
			eb.accounted = time.Now()
			log.Warnf("Redis %s: %d calls in a row failed (the last: %v); the circuit breaker opens: "+
				"failure_mode decides requests at once until a probe, every %d ms at first, gets an answer",
				r.ServiceName, r.BreakerFailures, err, r.BreakerProbeMs)
			return
		}
		eb.countOpenTime(time.Now())
		log.Infof("Redis %s answers again: the circuit breaker closes after %s open", r.ServiceName, openFor.Round(time.Millisecond))
	}
	s.breakers[key] = eb
	return eb
}

// countOpenTime adds the open time since it last counted.
func (eb *endpointBreaker) countOpenTime(now time.Time) {
	if ms := now.Sub(eb.accounted).Milliseconds(); ms > 0 {
		eb.openMs.Increment(uint64(ms))
		eb.accounted = eb.accounted.Add(time.Duration(ms) * time.Millisecond)
	}
}

// probeBreakers sends the probes that are due, from the tick, and counts
// the open time.
func (s *startState) probeBreakers() {
	now := time.Now()
	for _, eb := range s.breakers {
		if eb.breaker.Open() {
			eb.countOpenTime(now)
			eb.prober.Probe(now)
		}
	}
}
