// Package limiter is the plugin's per-request flow, between the gateway's
// hooks and the pure packages: it matches a request against the rules
// (config), asks Redis whether its subject has budget left (scripts),
// answers 429/503 or lets it through, reads the usage from the response as it
// streams (tokenusage) and charges it at the end. Its hooks are here:
// Register (which main.go's init calls) installs them, the wrapper's
// (onPluginStart, onRequestHeaders, onResponseHeaders, onStreamDone) and,
// around the wrapper's VM context, the host's own that the wrapper does not
// pass on (the bodies, the trailers: host.go).
package limiter

import (
	"os"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/wasm-go/pkg/log"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/locallimit"
	"github.com/tokenlimit/ai-token-ratelimit/quota"
	"github.com/tokenlimit/ai-token-ratelimit/scripts"
)

// Register installs the plugin's hooks as the process's proxy-wasm VM
// context (the wrapper's, wrapped as host.go explains): main.go's init calls
// it, and so do tests that run the plugin in Go mode (compiled natively, in
// the host emulator).
func Register() {
	proxywasm.SetVMContext(vmContext{wrapper.NewCommonVmCtx(
		"ai-token-ratelimit",
		wrapper.PrePluginStartOrReload[PluginConfig](onPluginStart),
		wrapper.ParseConfig(parseConfig),
		wrapper.ProcessRequestHeaders(onRequestHeaders),
		wrapper.ProcessResponseHeaders(onResponseHeaders),
		wrapper.ProcessStreamDone(onStreamDone),
	)})
}

// PluginConfig is one parsed configuration (the global one, or one per route
// or domain) with the Redis client it talks through.
type PluginConfig struct {
	rules   *config.Config
	redis   *scripts.Client
	metrics *metrics
	start   *startState         // what the configurations of this start share: the tick, postponed charges
	ids     *vmIDs              // the VM's ids for its Redis endpoint (ids.go)
	queues  *waitingRoom        // where over-limit requests wait (nil: they are rejected)
	local   *locallimit.Limiter // the worker's own windows (failure_mode local; nil otherwise)
	alerts  *alerter            // where budget alerts go (nil: budget_alerts is off)

	rejectedType  string          // the Content-Type of rejected_msg (rejection.go)
	shadowLog     *rateLimitedLog // the shadow_mode lines (shadow.go)
	unmatchedLog  *rateLimitedLog // the lines about requests no rule item matched (shadow.go)
	modelLimits   bool            // some limit depends on the request's model (models.go)
	pricesByModel bool            // what a request costs in money depends on its model (money.go)
}

// parseConfig parses and validates a configuration; any error refuses it, so
// the plugin never starts half-configured.
func parseConfig(json gjson.Result, pc *PluginConfig) error {
	rules, err := config.Parse(json)
	if err != nil {
		return err
	}
	password, err := rules.Redis.ResolvePassword(os.Getenv)
	if err != nil {
		return err
	}
	pc.rules = rules
	for _, o := range rules.Overlaps() {
		if o.Merged {
			log.Infof("rule %s: %s", rules.RuleName, o.Text)
		} else {
			log.Warnf("rule %s: %s", rules.RuleName, o.Text)
		}
	}
	for _, note := range append(rules.FallbackNotes(), rules.PricingNotes()...) {
		log.Infof("rule %s: %s", rules.RuleName, note)
	}
	pc.rejectedType = rejectedContentType(rules.RejectedMsg)
	pc.modelLimits = rules.HasModelLimits()
	pc.pricesByModel = rules.PricesByModel()
	options := quota.Options(rules)
	if rules.Alerts != nil {
		options.Thresholds = rules.Alerts.Thresholds // admissions and charges report crossings
		options.AlertOwner = rules.AlertOwner()      // and write them to this owner's outboxes
	}
	options.OneServer = !rules.Redis.Cluster // an alert's outbox listed in the call that records it
	options.ByKind = rules.QuotaHeaders&(config.QuotaHeadersOpenAI|config.QuotaHeadersIETF) != 0
	pc.shadowLog, pc.unmatchedLog = &rateLimitedLog{}, &rateLimitedLog{}
	pc.redis = scripts.NewClient(scripts.Endpoint{
		ServiceName: rules.Redis.ServiceName,
		ServicePort: rules.Redis.ServicePort,
		Username:    rules.Redis.Username,
		Password:    password,
		TimeoutMs:   uint32(rules.Redis.TimeoutMs),
		Database:    rules.Redis.Database,
	}, options)
	if err := pc.redis.Init(); err != nil {
		// Not fatal: the gateway may learn of the Redis cluster later; every
		// call retries the init and applies failure_mode while it fails.
		log.Warnf("%v; will retry on the first request", err)
	}
	pc.start = thisStart()
	pc.metrics = newMetrics(rules, &pc.start.tallies)
	pc.alerts = newAlerter(rules, pc.redis, pc.start)
	endpoint := pc.start.endpointOf(rules.Redis, pc.redis)
	pc.redis.SetBreaker(endpoint.breaker)
	pc.redis.SetLatency(endpoint.latency)
	pc.ids = endpoint.ids
	if rules.FailureMode == config.FailLocal {
		pc.local = pc.start.newLocal(rules, pc.redis, pc.ids)
	}
	if rules.OverLimit == config.Queue {
		pc.queues = pc.start.waitingRoom()
	}
	return nil
}
