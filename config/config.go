// Package config parses and validates the ai-token-ratelimit plugin
// configuration and matches requests against its rules.
//
// It accepts every configuration the Higress ai-token-ratelimit plugin
// accepts, with the same meaning as in Higress 2.2.4 (every rule item a
// request matches applies, and global_threshold may be set beside
// rule_items: see Config.MatchAll), plus these extensions:
//
//   - rule_match_mode: first, the first-match behaviour of earlier Higress
//     releases; any number of rule items (Higress: 10); and rule items whose
//     keys name one subject count it once, at each window's tightest limit
//     (see Shared), where Higress counts it once per item.
//   - A limit key may set several windows (token_per_second, token_per_minute,
//     token_per_hour, token_per_day); all of them are enforced. Higress
//     silently keeps only one.
//   - show_limit_quota_header, failure_mode (allow, deny, and local with
//     local_share and local_max_subjects), the Redis circuit breaker
//     (redis.breaker_failures, redis.breaker_probe_ms) and
//     xff_num_trusted_hops.
//   - Request windows (query_per_second … query_per_day) and
//     max_concurrent_requests beside or instead of the token windows, with
//     window_type and concurrency_lease_seconds.
//   - over_limit_action: queue, with max_queue_wait_ms: an over-limit request
//     waits for capacity instead of being rejected at once.
//   - unmatched_threshold: a limit for the requests no rule item matches,
//     which Higress lets through unlimited.
//   - ipv6_prefix_length: per-IP limits key an IPv6 client by its network
//     (a /64 by default), not by each of its addresses.
//   - token_weights.models keys may be prefixes ("claude-opus-4*") and
//     regexps, besides exact model names.
//   - Limits by model: limit_by_model and limit_by_per_model rule items,
//     whose keys match the request's model (read from model_source), and
//     per_model under a limit key, global_threshold or unmatched_threshold:
//     within the subject the key limits, each model's own limit, the first
//     entry that matches it (see Config.MatchAll).
//   - The quota endpoints: quota_path (a client's own status) and admin
//     (an API to read, reset, grant and override any subject, named by a
//     SubjectRef that Config.Resolve matches), and limit_overrides: the
//     admission reads per-subject limit overrides from Redis.
//
// A query parameter or cookie sent more than once is read both as its first
// and as its last value (see Config.MatchAll), since upstreams and auth
// layers differ in which they take.
//
// It is stricter than Higress: wrong JSON types, unknown or duplicate fields
// (except top-level keys starting with "_", which the gateway adds), invalid
// header names, invalid regexps and invalid IPs/CIDRs are refused by Parse
// with a *FieldError naming the field path and the bad value. JSON null is
// treated as "not set" (an empty YAML value), except for limit_by_consumer,
// limit_by_per_consumer, limit_by_model and limit_by_per_model, whose mere
// presence selects the limit type.
//
// The package has no proxy-wasm dependency: the plugin implements Request
// over the host API and calls Config.MatchAll on every request.
package config

import (
	"net/netip"
	"regexp"
	"strconv"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// Defaults and well-known names.
const (
	DefaultRejectedCode = 429
	DefaultRejectedMsg  = "Too many requests"
	// DefaultMaxRetryWaitSeconds is max_retry_wait's default: a minute's
	// limit is worth the wait an SDK takes; a spent day is not.
	DefaultMaxRetryWaitSeconds = 60
	DefaultRedisTimeoutMs      = 1000
	DefaultLocalMaxSubjects    = 10000
	DefaultBreakerFailures     = 5    // consecutive failed Redis calls that open the breaker
	DefaultBreakerProbeMs      = 1000 // the first wait before probing an open breaker's Redis
	DefaultRedisPort           = 6379
	DefaultRedisStaticPort     = 80 // when service_name ends with StaticServiceSuffix
	DefaultLeaseSeconds        = 600
	DefaultMaxQueueWaitMs      = 5000
	DefaultIPv6PrefixLength    = 64 // what one client (a home, a cloud instance) is given
	StaticServiceSuffix        = ".static"
	ConsumerHeader             = "x-mse-consumer" // where the limit_by_*consumer types read the consumer
	CookieHeader               = "cookie"
	XForwardedForHeader        = "x-forwarded-for"
	RegexpKeyPrefix            = "regexp:"
	AnyKey                     = "*"
)

const (
	perIPRemoteAddr         = "from-remote-addr"
	perIPHeaderPrefix       = "from-header-"
	modelSourceHeaderPrefix = "header:"
	gatewayReservedPrefix   = "_" // top-level keys added by the gateway (_rules_, _match_route_...)
	xffTrustedHopsUnset     = -1
	maxXFFTrustedHops       = 1<<31 - 1
	maxRedisTimeoutMs       = 1<<32 - 1 // proxy-wasm timeouts are uint32 milliseconds
	maxRedisDatabase        = 1<<31 - 1
	maxBreakerFailures      = 1000
	maxLocalShare           = 1 << 20
	maxLocalMaxSubjects     = 1 << 24
	minBreakerProbeMs       = 10
	maxBreakerProbeMs       = 30000 // scripts.MaxProbeInterval: probes wait no longer
	minRejectedCode         = 100
	maxRejectedCode         = 599
	maxRetryWaitSeconds     = 366 * 86400 // a year: longer than any window's wait
	maxQuotedValueInMessage = 100         // bytes of a bad value quoted in an error message
)

// Config is a parsed, validated plugin configuration. It is read-only after
// Parse and safe for concurrent use.
type Config struct {
	RuleName string
	// Global is set when global_threshold is used: a limit every request
	// counts in, beside the rule items it matches, if any. Its Key is "*"
	// and its Kind KeyAny.
	Global *LimitKey
	// Items are the rule_items, in configuration order; under MatchAll,
	// every one a request matches limits it.
	Items []RuleItem

	RejectedCode uint32
	// MaxRetryWaitSeconds is max_retry_wait: a rejection whose limit has
	// room again later than this tells the client not to retry
	// (x-should-retry: false), where the SDKs would sleep for it.
	MaxRetryWaitSeconds int64
	// RejectedMsg is rejected_msg, and RejectedMsgSet says it was
	// configured: without it, a rejection speaks the request's API.
	RejectedMsg    string
	RejectedMsgSet bool
	// QuotaHeaders is quota_headers, with show_limit_quota_header's
	// tokenratelimit form: the quota headers each response of a limited
	// request carries.
	QuotaHeaders QuotaHeaders
	// Shadow is shadow_mode: every limit counts and shows, none rejects or
	// queues; the requests that would have been rejected are logged and
	// counted.
	Shadow      bool
	FailureMode FailureMode
	// LocalShare and LocalMaxSubjects are local_share and
	// local_max_subjects, for failure_mode local: how many workers (on all
	// replicas) share each limit, and how many subjects one worker holds.
	LocalShare       int64
	LocalMaxSubjects int64
	// XFFTrustedHops is xff_num_trusted_hops, or -1 when unset.
	XFFTrustedHops int
	// IPv6PrefixLength is ipv6_prefix_length: a limit_by_per_ip subject of
	// an IPv6 client is its network of this many bits.
	IPv6PrefixLength int
	// Unmatched is set when unmatched_threshold is used: the limit of the
	// requests no rule item matches, all sharing one subject. Its Key is "*"
	// and its Kind KeyAny.
	Unmatched *LimitKey
	Redis     Redis

	// MatchMode is rule_match_mode.
	MatchMode MatchMode
	// Reservation is token_reservation.
	Reservation Reservation
	// EstimateOptions are the options a request body is read with before
	// admission, built once the configuration is parsed (estimateOptions).
	EstimateOptions estimate.Options
	// Cost is token_count_strategy with token_weights.
	Cost Cost
	// Pricing is pricing: what each model's tokens cost, which usd_per_*
	// windows count.
	Pricing Pricing
	// Calendar is calendar: the time zone and first day of the week of the
	// day, week and month windows (see Calendar.Aligned).
	Calendar Calendar
	// WindowType is window_type, for every window.
	WindowType WindowType
	// LeaseSeconds is concurrency_lease_seconds: how long a concurrency lease
	// outlives its last renewal when its gateway never releases it.
	LeaseSeconds int64
	// OverLimit is over_limit_action: what happens to an over-limit request.
	OverLimit OverLimitAction
	// MaxQueueWaitMs is max_queue_wait_ms: the longest a request waits in
	// the queue before it is rejected (with OverLimit Queue).
	MaxQueueWaitMs int64
	// StreamUsage is stream_usage: whether OpenAI-style streaming requests
	// are made to ask for their usage.
	StreamUsage StreamUsage
	// AmbiguousBody is ambiguous_body: what becomes of a request whose body
	// JSON parsers read differently (see package estimate).
	AmbiguousBody AmbiguousBody
	// ModelSources is model_source: where the plugin reads a request's
	// model (Request.Model), in order, the first that names one winning;
	// [body, path] unless configured.
	ModelSources []ModelSource

	// QuotaPath is quota_path: a GET on it is answered by the plugin with
	// the status of every subject the request matches; "" when off.
	QuotaPath string
	// Admin is admin: the admin API (status, reset, grant, overrides of
	// any subject); nil when off.
	Admin *Admin
	// LimitOverrides is limit_overrides: admissions read per-subject limit
	// overrides (set through the admin API or the CLI) from Redis.
	LimitOverrides bool
	// Alerts is budget_alerts: the thresholds that alert and the webhook
	// alerts go to; nil when off.
	Alerts *Alerts
	// SecretHeaders and SecretParams are secret_headers (lower-cased) and
	// secret_params: headers and query parameters whose values are
	// credentials, besides the well-known ones (see RuleItem.Secret).
	SecretHeaders []string
	SecretParams  []string
	// Deployments is deployments: Azure OpenAI deployment names and the
	// models they deploy, for Route.
	Deployments map[string]string
	// Priority is priority: the levels of requests (nil: none).
	Priority *Priority
	// Fallbacks are model_fallbacks: the models to serve instead of one
	// whose budget has no room (see FallbacksOf); fallbacks indexes them.
	Fallbacks    []Fallback
	fallbacks    modelIndex[[]string]
	fallbacksAny []string // "*"'s
	// CompressedBody is compressed_body: what becomes of a limited
	// request whose body is in a content coding the plugin does not
	// decode (br, zstd, several).
	CompressedBody CompressedBody
	// AccessLog is access_log: each limited request's usage, cost,
	// decision and subject are written where the gateway's access log
	// reads them (Higress's ai_log filter state); on unless false.
	AccessLog bool
}

// CompressedBody is compressed_body.
type CompressedBody uint8

const (
	// CompressedEstimate ("estimate", default): limit it as the largest
	// body the plugin reads (token_reservation.max_body_bytes), of an
	// unknown model.
	CompressedEstimate CompressedBody = iota
	// CompressedReject ("reject"): answer 415, saying which codings are
	// read.
	CompressedReject
)

// ModelSourceKind is where a request's model is read from.
type ModelSourceKind uint8

const (
	// ModelFromHeader ("header:<name>"): a request header's value.
	ModelFromHeader ModelSourceKind = iota + 1
	// ModelFromBody ("body"): the body's top-level "model".
	ModelFromBody
	// ModelFromPath ("path"): the model a Gemini or Vertex AI path names.
	ModelFromPath
)

func (k ModelSourceKind) String() string {
	switch k {
	case ModelFromHeader:
		return "header"
	case ModelFromBody:
		return "body"
	case ModelFromPath:
		return "path"
	}
	return "ModelSourceKind(" + strconv.Itoa(int(k)) + ")"
}

// ModelSource is one entry of model_source.
type ModelSource struct {
	Kind ModelSourceKind
	// Header is the lower-cased header name, for ModelFromHeader; "" for
	// the others.
	Header string
}

// String returns the entry as configured, the header name lower-cased:
// "header:x-model", "body" or "path".
func (s ModelSource) String() string {
	if s.Kind == ModelFromHeader {
		return modelSourceHeaderPrefix + s.Header
	}
	return s.Kind.String()
}

// QuotaHeaders is a set of quota header forms (quota_headers).
type QuotaHeaders uint8

const (
	// QuotaHeadersTokenRateLimit: X-TokenRateLimit-Limit, -Remaining and
	// -Reset, of the tightest window (show_limit_quota_header: true).
	QuotaHeadersTokenRateLimit QuotaHeaders = 1 << iota
	// QuotaHeadersOpenAI: OpenAI's x-ratelimit-{limit,remaining,reset}-tokens
	// and -requests, of the tightest token and request windows.
	QuotaHeadersOpenAI
	// QuotaHeadersIETF: RateLimit-Policy and RateLimit
	// (draft-ietf-httpapi-ratelimit-headers).
	QuotaHeadersIETF
)

// quotaHeaderNames are the names of the forms in quota_headers, in the
// order of their bits.
var quotaHeaderNames = []string{"tokenratelimit", "openai", "ietf"}

// StreamUsage says whether an OpenAI chat or legacy completions request
// with "stream": true, which reports its usage only when it asks for it
// (stream_options.include_usage), is rewritten to ask.
type StreamUsage uint8

const (
	// StreamUsageInject ("inject", default): ask for the usage, and take the
	// usage-only chunk out of the response again.
	StreamUsageInject StreamUsage = iota
	// StreamUsageOff ("off"): leave requests as they are (Higress's
	// behaviour); a stream that did not ask is charged by estimate.
	StreamUsageOff
)

// AmbiguousBody is what becomes of a request the limiter reads the body of
// (for its model, its cost or to ask a stream for its usage) when common
// JSON parsers read that body differently: duplicate or case-variant keys
// that matter, a byte order mark, NaN or Infinity, comments, trailing
// commas, a model name that is not UTF-8, or an object no parser reads.
type AmbiguousBody uint8

const (
	// AmbiguousStrictest ("strictest", default): limit and price it at its
	// most expensive reading: every model it may name counts (the
	// strictest per-model limits and weights among them), and a model it
	// cannot name is UnknownModel.
	AmbiguousStrictest AmbiguousBody = iota
	// AmbiguousReject ("reject"): answer 400, saying what is ambiguous.
	AmbiguousReject
)

// OverLimitAction is what happens to a request over a limit.
type OverLimitAction uint8

const (
	// Reject (default, Higress): answer rejected_code at once.
	Reject OverLimitAction = iota
	// Queue: keep the request paused until the limiter says there is room,
	// for at most MaxQueueWaitMs, then reject it.
	Queue
)

func (a OverLimitAction) String() string {
	switch a {
	case Reject:
		return "reject"
	case Queue:
		return "queue"
	}
	return "OverLimitAction(" + strconv.Itoa(int(a)) + ")"
}

// WindowType is how windows count.
type WindowType uint8

const (
	// Fixed (default, Higress): windows are aligned to the epoch and start
	// from zero at each boundary.
	Fixed WindowType = iota
	// Sliding: the current bucket plus the previous one weighted by the part
	// of it still inside the window.
	Sliding
)

func (t WindowType) String() string {
	switch t {
	case Fixed:
		return "fixed"
	case Sliding:
		return "sliding"
	}
	return "WindowType(" + strconv.Itoa(int(t)) + ")"
}

// Redis is the redis section.
type Redis struct {
	ServiceName string
	ServicePort int
	Username    string
	Password    string
	// PasswordEnv is password_env: the environment variable of the
	// plugin's VM that holds the password (the gateway passes it from a
	// Kubernetes Secret), read by Redis.ResolvePassword where the password
	// is used; "" when the password, if any, is in the configuration.
	PasswordEnv string
	TimeoutMs   int64
	Database    int
	// BreakerFailures is how many consecutive failed calls open the
	// circuit breaker (0: it never opens); BreakerProbeMs the first wait
	// before a probe (it doubles after each failed probe, up to 30 s).
	BreakerFailures int64
	BreakerProbeMs  int64
	// Cluster says whether the Redis may be a Redis Cluster (or a proxy
	// that shards keys across servers): each call then keeps its keys in
	// one hash slot, one call per slot a request's subjects span. false:
	// one Redis server holds every key, and a request's subjects, whatever
	// their slots, go in one call each way.
	Cluster bool
}

// FailureMode says what to do with a request when Redis cannot be reached.
type FailureMode uint8

const (
	FailAllow FailureMode = iota // "allow" (default): let the request through
	FailDeny                     // "deny": reject it
	FailLocal                    // "local": limit it in the worker's memory, at limit ÷ local_share
)

func (m FailureMode) String() string {
	switch m {
	case FailAllow:
		return "allow"
	case FailDeny:
		return "deny"
	case FailLocal:
		return "local"
	}
	return "FailureMode(" + strconv.Itoa(int(m)) + ")"
}

// LimitType is the kind of a rule item, named after its configuration key.
type LimitType uint8

const (
	ByHeader LimitType = iota + 1
	ByParam
	ByConsumer
	ByCookie
	ByPerHeader
	ByPerParam
	ByPerConsumer
	ByPerCookie
	ByPerIP
	ByModel     // the request's model (Request.Model); keys are names, prefixes, regexps or "*"
	ByPerModel  // each distinct model of the requests its keys match
	ByAPIKey    // the request's API key, wherever it is sent (see APIKeys)
	ByPerAPIKey // each distinct API key of the requests its keys match
)

// limitTypes is indexed by LimitType; its order is the order used in messages.
var limitTypes = [...]struct {
	field string
	per   bool
}{
	ByHeader:      {"limit_by_header", false},
	ByParam:       {"limit_by_param", false},
	ByConsumer:    {"limit_by_consumer", false},
	ByCookie:      {"limit_by_cookie", false},
	ByPerHeader:   {"limit_by_per_header", true},
	ByPerParam:    {"limit_by_per_param", true},
	ByPerConsumer: {"limit_by_per_consumer", true},
	ByPerCookie:   {"limit_by_per_cookie", true},
	ByPerIP:       {"limit_by_per_ip", true},
	ByModel:       {"limit_by_model", false},
	ByPerModel:    {"limit_by_per_model", true},
	ByAPIKey:      {"limit_by_api_key", false},
	ByPerAPIKey:   {"limit_by_per_api_key", true},
}

// String returns the Higress configuration key, e.g. "limit_by_header".
func (t LimitType) String() string {
	if t >= ByHeader && int(t) < len(limitTypes) {
		return limitTypes[t].field
	}
	return "LimitType(" + strconv.Itoa(int(t)) + ")"
}

// PerValue reports whether each distinct request value gets its own counter
// (the limit_by_per_* types). For the other types all requests matching a
// limit key share that key's counter.
func (t LimitType) PerValue() bool {
	return t >= ByHeader && int(t) < len(limitTypes) && limitTypes[t].per
}

// ModelValued reports whether the type's value is the request's model
// (limit_by_model, limit_by_per_model): its keys may be prefixes, and its
// limit keys take no per_model.
func (t LimitType) ModelValued() bool { return t == ByModel || t == ByPerModel }

// ReadsAPIKey reports whether the type's value is the request's API key
// (limit_by_api_key, limit_by_per_api_key): every key it carries (APIKeys).
func (t LimitType) ReadsAPIKey() bool { return t == ByAPIKey || t == ByPerAPIKey }

func limitTypeByField(field string) (LimitType, bool) {
	for t := ByHeader; int(t) < len(limitTypes); t++ {
		if limitTypes[t].field == field {
			return t, true
		}
	}
	return 0, false
}

// RuleItem is one entry of rule_items.
type RuleItem struct {
	Type LimitType
	// Name is where the value is read from: the lower-cased header name, the
	// query parameter name, the cookie name, ConsumerHeader for the consumer
	// types, for ByPerIP the lower-cased header name, "" meaning the
	// connection's peer address, and "" for the model types (the model is
	// the request's, read from Config.ModelSources).
	Name string
	// Raw is the limit_by_* value as configured ("x-mse-consumer" for the
	// consumer types, "" for the model types, whose value is ignored),
	// which Higress uses in its Redis keys.
	Raw  string
	Keys []LimitKey
	// Secret says the value it reads is a credential (an API key header,
	// a cookie, a key in the query, or one of secret_headers and
	// secret_params): logs, alerts and headers show it as a Fingerprint.
	Secret bool
}

// KeyKind says how a limit key matches a value.
type KeyKind uint8

const (
	KeyExact  KeyKind = iota // the value equals Key
	KeyAny                   // "*": any non-empty value
	KeyRegexp                // "regexp:<re>": Regexp matches (unanchored) the value
	KeyIPNet                 // an IP or CIDR (limit_by_per_ip): Prefix contains the IP
	KeyPrefix                // "<prefix>*" (model keys only): the value starts with Key without its '*'
)

func (k KeyKind) String() string {
	switch k {
	case KeyExact:
		return "exact"
	case KeyAny:
		return "any"
	case KeyRegexp:
		return "regexp"
	case KeyIPNet:
		return "ipnet"
	case KeyPrefix:
		return "prefix"
	}
	return "KeyKind(" + strconv.Itoa(int(k)) + ")"
}

// LimitKey is one entry of limit_keys (or the global or unmatched
// threshold), or one entry of a limit key's per_model.
type LimitKey struct {
	Key    string // as configured; a per_model entry's model pattern
	Kind   KeyKind
	Regexp *regexp.Regexp // KeyRegexp
	// literal is Regexp's literal when it is a plain one, matched without
	// running it (see literal.go); form says how (notLiteral: run it).
	literal string
	form    literalForm
	// Prefix is set for KeyIPNet: masked, a bare IP becoming /32 or /128, and
	// IPv4-mapped IPv6 prefixes of 96 bits or more turned into IPv4 ones (the
	// client IP is unmapped too).
	Prefix netip.Prefix
	// Windows are sorted by Seconds then Unit. A limit key has at least one
	// window or a MaxConcurrent.
	Windows []Window
	// MaxConcurrent is max_concurrent_requests: at most this many requests of
	// the subject in progress at once; 0 when not set.
	MaxConcurrent int64
	// Soft is soft: the key's windows count, alert and show in the
	// headers and the quota endpoints, but never reject (its
	// max_concurrent_requests still does). A per_model entry has its own.
	Soft bool
	// priorityName is priority as configured, priority its level + 1 (0:
	// none), reserve its reserve as configured and open the share of its
	// limits open to each level (nil: all of them to every level): see
	// priority.go.
	priorityName string
	priority     int
	reserve      []levelShare
	open         *OpenShares
	// PerModel is per_model: within the subject this key limits, the limit
	// of each model, the first entry whose pattern (Key: an exact name,
	// "<prefix>*", "regexp:<re>" or "*") matches the request's model
	// applying. Each entry is a LimitKey of its own, whose PerModel is nil.
	// nil when not set, and always for the keys of the model types.
	PerModel []LimitKey
}

// ModelKind says how a token_weights.models key matches a model name.
type ModelKind uint8

const (
	ModelExact  ModelKind = iota // the name itself
	ModelPrefix                  // "<prefix>*": the names that start with the prefix
	ModelRegexp                  // "regexp:<re>": the names Regexp matches (unanchored)
)

func (k ModelKind) String() string {
	switch k {
	case ModelExact:
		return "exact"
	case ModelPrefix:
		return "prefix"
	case ModelRegexp:
		return "regexp"
	}
	return "ModelKind(" + strconv.Itoa(int(k)) + ")"
}

// ModelRule is an entry of token_weights.models: the weights of the models
// its key matches.
type ModelRule struct {
	Key    string // as configured
	Kind   ModelKind
	Name   string         // ModelExact: the name; ModelPrefix: the prefix
	Regexp *regexp.Regexp // ModelRegexp
	// Weights are the model's, the token_weights ones where it sets none.
	Weights Weights
}

// Unit is what a window counts.
type Unit uint8

const (
	UnitTokens   Unit = iota // token_per_*: tokens the responses used
	UnitRequests             // query_per_*: requests admitted
	UnitUSD                  // usd_per_*: what the responses cost by pricing, in nanodollars
)

func (u Unit) String() string {
	switch u {
	case UnitTokens:
		return "tokens"
	case UnitRequests:
		return "requests"
	case UnitUSD:
		return "usd"
	}
	return "Unit(" + strconv.Itoa(int(u)) + ")"
}

// Window is one limit: at most Limit units per Seconds (for UnitUSD,
// nanodollars).
type Window struct {
	Field   string // configuration field, e.g. "token_per_minute"
	Unit    Unit
	Seconds int64
	Limit   int64
	open    *OpenShares // its key's reserve (see Open; nil: none)
}

type windowKind struct {
	field   string
	unit    Unit
	seconds int64
}

// windowKinds is the single definition of the window fields accepted in
// limit_keys entries and global_threshold.
var windowKinds = [...]windowKind{
	{"token_per_second", UnitTokens, 1},
	{"token_per_minute", UnitTokens, 60},
	{"token_per_hour", UnitTokens, 3600},
	{"token_per_day", UnitTokens, DaySeconds},
	{"token_per_week", UnitTokens, WeekSeconds},
	{"token_per_month", UnitTokens, MonthSeconds},
	{"query_per_second", UnitRequests, 1},
	{"query_per_minute", UnitRequests, 60},
	{"query_per_hour", UnitRequests, 3600},
	{"query_per_day", UnitRequests, DaySeconds},
	{"query_per_week", UnitRequests, WeekSeconds},
	{"query_per_month", UnitRequests, MonthSeconds},
	{"usd_per_hour", UnitUSD, 3600},
	{"usd_per_day", UnitUSD, DaySeconds},
	{"usd_per_week", UnitUSD, WeekSeconds},
	{"usd_per_month", UnitUSD, MonthSeconds},
}

// ResolvePassword is the Redis password: the configured one, or the value
// of the environment variable password_env names, read with getenv (an
// unset or empty variable is an error naming it: a gateway whose Secret
// did not reach the VM would otherwise fail every call with NOAUTH).
func (r Redis) ResolvePassword(getenv func(string) string) (string, error) {
	if r.PasswordEnv == "" {
		return r.Password, nil
	}
	if v := getenv(r.PasswordEnv); v != "" {
		return v, nil
	}
	return "", fieldErr("redis.password_env", "the environment variable ", r.PasswordEnv,
		" is not set (or empty) where the plugin runs: pass it to the VM (a WasmPlugin's vmConfig.env)")
}
