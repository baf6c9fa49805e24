package config

// The configuration's schema: one table of fields per object, then Parse
// and the checks that involve several fields. Values the tables cannot check
// alone (rule items, limit keys) are read in rules.go; the strict JSON
// readers are in jsonread.go, the table machinery in fieldtable.go.

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// Names of the fields that code or messages outside their table mention.
// Every other field is named only in its table.
const (
	globalField       = "global_threshold"
	itemsField        = "rule_items"
	unmatchedField    = "unmatched_threshold"
	strategyField     = "token_count_strategy"
	weightsField      = "token_weights"
	overLimitField    = "over_limit_action"
	maxQueueWaitField = "max_queue_wait_ms"
	localShareField   = "local_share"
	localMaxField     = "local_max_subjects"
	limitKeysField    = "limit_keys"
	keyField          = "key"
	perModelField     = "per_model"
	modelField        = "model"
	softField         = "soft"
	fallbacksField    = "model_fallbacks"
	priorityField     = "priority"
	reserveField      = "reserve"
)

// MaxLimit is the largest limit (token_per_*, query_per_*,
// max_concurrent_requests): 2^53. Redis's Lua scripts count in doubles,
// which hold every integer up to it exactly and no odd one above; a larger
// limit (an operator's "unlimited", 2^63 − 1) would be read rounded, and
// turns into a garbage reply. Real limits are far below it.
const MaxLimit = 1 << 53

// Bounds of top-level fields.
const (
	maxLeaseSeconds = 7 * 86400
	maxQueueWaitMs  = 600_000 // ten minutes: longer than any gateway lets a request wait
)

// topFields is the table of the top-level fields. Its order is the order in
// which their values are checked.
var topFields = fields[Config]{
	required(nonEmptyStringField("rule_name", func(c *Config, s string) { c.RuleName = s })),
	customField(priorityField, readPriority),
	customField(globalField, readGlobal),
	customField(itemsField, readRuleItems),
	customField(unmatchedField, readUnmatched),
	intField("rejected_code", minRejectedCode, maxRejectedCode, func(c *Config, n int64) { c.RejectedCode = uint32(n) }),
	stringField("rejected_msg", func(c *Config, s string) { c.RejectedMsg, c.RejectedMsgSet = s, true }),
	intField("max_retry_wait", 0, maxRetryWaitSeconds, func(c *Config, n int64) { c.MaxRetryWaitSeconds = n }),
	boolField("show_limit_quota_header", func(c *Config, b bool) {
		if b {
			c.QuotaHeaders |= QuotaHeadersTokenRateLimit
		}
	}),
	customField("quota_headers", readQuotaHeaders),
	boolField("shadow_mode", func(c *Config, b bool) { c.Shadow = b }),
	boolField("access_log", func(c *Config, b bool) { c.AccessLog = b }),
	enumField("failure_mode", []string{"allow", "deny", "local"}, func(c *Config, i int) { c.FailureMode = FailureMode(i) }),
	intField(localShareField, 1, maxLocalShare, func(c *Config, n int64) { c.LocalShare = n }),
	intField(localMaxField, 1, maxLocalMaxSubjects, func(c *Config, n int64) { c.LocalMaxSubjects = n }),
	intField("xff_num_trusted_hops", 0, maxXFFTrustedHops, func(c *Config, n int64) { c.XFFTrustedHops = int(n) }),
	intField("ipv6_prefix_length", 1, 128, func(c *Config, n int64) { c.IPv6PrefixLength = int(n) }),
	enumField("rule_match_mode", []string{"first", "all"}, func(c *Config, i int) { c.MatchMode = MatchMode(i) }),
	objectField("token_reservation", reservationFields, func(c *Config) *Reservation { return &c.Reservation }),
	enumField(strategyField, countStrategies[:], func(c *Config, i int) { c.Cost.Strategy = CountStrategy(i) }),
	objectField(weightsField, tokenWeightFields, func(c *Config) *Cost { return &c.Cost }),
	enumField("window_type", []string{"fixed", "sliding"}, func(c *Config, i int) { c.WindowType = WindowType(i) }),
	intField("concurrency_lease_seconds", 1, maxLeaseSeconds, func(c *Config, n int64) { c.LeaseSeconds = n }),
	enumField(overLimitField, []string{"reject", "queue"}, func(c *Config, i int) { c.OverLimit = OverLimitAction(i) }),
	intField(maxQueueWaitField, 1, maxQueueWaitMs, func(c *Config, n int64) { c.MaxQueueWaitMs = n }),
	customField("stream_usage", readStreamUsage),
	enumField("ambiguous_body", []string{"strictest", "reject"}, func(c *Config, i int) { c.AmbiguousBody = AmbiguousBody(i) }),
	customField("model_source", readModelSources),
	customField("deployments", readDeployments),
	enumField("compressed_body", []string{"estimate", "reject"}, func(c *Config, i int) { c.CompressedBody = CompressedBody(i) }),
	customField("pricing", readPricing),
	customField("pricing_catalog", readPricingCatalog),
	customField(fallbacksField, readFallbacks),
	objectField("calendar", calendarFields, func(c *Config) *Calendar { return &c.Calendar }),
	customField("quota_path", readQuotaPath),
	customField("admin", readAdmin),
	boolField("limit_overrides", func(c *Config, b bool) { c.LimitOverrides = b }),
	customField("budget_alerts", readBudgetAlerts),
	customField("secret_headers", readSecretHeaders),
	customField("secret_params", readSecretParams),
	required(objectField("redis", redisFields, func(c *Config) *Redis { return &c.Redis })),
}

// redisFields is the table of redis. An unset service_port is defaulted by
// checkCombinations, from service_name.
var redisFields = fields[Redis]{
	required(nonEmptyStringField("service_name", func(r *Redis, s string) { r.ServiceName = s })),
	intField("service_port", 1, 65535, func(r *Redis, n int64) { r.ServicePort = int(n) }),
	stringField("username", func(r *Redis, s string) { r.Username = s }),
	stringField("password", func(r *Redis, s string) { r.Password = s }),
	customField("password_env", readPasswordEnv),
	intField("timeout", 1, maxRedisTimeoutMs, func(r *Redis, n int64) { r.TimeoutMs = n }),
	intField("database", 0, maxRedisDatabase, func(r *Redis, n int64) { r.Database = int(n) }),
	intField("breaker_failures", 0, maxBreakerFailures, func(r *Redis, n int64) { r.BreakerFailures = n }),
	intField("breaker_probe_ms", minBreakerProbeMs, maxBreakerProbeMs, func(r *Redis, n int64) { r.BreakerProbeMs = n }),
	boolField("cluster", func(r *Redis, b bool) { r.Cluster = b }),
}

// reservationFields is the table of token_reservation.
var reservationFields = fields[Reservation]{
	boolField("enabled", func(r *Reservation, b bool) { r.Enabled = b }),
	intField("bytes_per_token", 1, 1<<20, func(r *Reservation, n int64) { r.BytesPerToken = n }),
	intField("default_completion_tokens", 0, 1<<40, func(r *Reservation, n int64) { r.DefaultCompletionTokens = n }),
	intField("max_body_bytes", 1, maxReservationBodyBytes, func(r *Reservation, n int64) { r.MaxBodyBytes = n }),
}

// weightFields is the table of a weights object, read into a Cost's
// Weights: a model's weights in token_weights.models.
var weightFields = fields[Cost]{
	numberField("input", 0, maxWeight, func(c *Cost, w float64) { c.Weights.Input = w }),
	numberField("output", 0, maxWeight, func(c *Cost, w float64) { c.Weights.Output = w }),
	numberField("cache_read", 0, maxWeight, func(c *Cost, w float64) { c.Weights.CacheRead = w }),
	numberField("cache_creation", 0, maxWeight, func(c *Cost, w float64) { c.Weights.CacheCreation = w }),
}

// tokenWeightFields is the table of token_weights: the weights, then the
// models overriding them (last, so that they start from every weight set).
var tokenWeightFields = append(slices.Clip(weightFields), customField("models", readModelWeights))

// limitsFields is the table of a limit key's limits: a window per
// windowKinds entry, and max_concurrent_requests.
var limitsFields = limitTable()

// globalFields is the table of global_threshold (and of unmatched_threshold,
// its shape), a limit key without a key: its limits, and its limits per
// model.
var globalFields = append(slices.Clip(limitsFields), customField(perModelField, readPerModel), customField(priorityField, readKeyPriority))

// limitKeyFields is the table of a limit_keys entry: the limits, the key,
// and the limits per model.
var limitKeyFields = append(slices.Clip(limitsFields), required(customField(keyField, readKeyText)),
	customField(perModelField, readPerModel), customField(priorityField, readKeyPriority))

// modelKeyFields are the tables of the limit_keys entries of the model
// types, by type: per_model is refused there, since the item's keys match
// the model already.
var modelKeyFields = map[LimitType]fields[LimitKey]{ByModel: modelKeyTable(ByModel), ByPerModel: modelKeyTable(ByPerModel)}

// perModelFields is the table of a per_model entry: the limits, and the
// pattern of the models it limits. per_model is named, to be refused.
var perModelFields = append(slices.Clip(limitsFields), required(customField(modelField, readModelPattern)),
	customField(perModelField, func(_ *LimitKey, path string, _ gjson.Result) error {
		return fieldErr(path, "not allowed in a per_model entry: per_model entries do not nest")
	}))

// modelKeyTable returns the table of a limit_keys entry of the model type t.
func modelKeyTable(t LimitType) fields[LimitKey] {
	return append(slices.Clip(limitsFields), required(customField(keyField, readKeyText)),
		customField(perModelField, func(_ *LimitKey, path string, _ gjson.Result) error {
			return fieldErr(path, "not allowed under ", t.String(), ": its keys match the model already")
		}), customField(priorityField, readKeyPriority))
}

// limitTable returns the table of a limit key's limits.
func limitTable() fields[LimitKey] {
	fs := make(fields[LimitKey], 0, len(windowKinds)+1)
	for _, w := range windowKinds {
		add := func(k *LimitKey, n int64) {
			k.Windows = append(k.Windows, Window{Field: w.field, Unit: w.unit, Seconds: w.seconds, Limit: n})
		}
		if w.unit == UnitUSD {
			fs = append(fs, usdLimitField(w.field, add))
		} else {
			fs = append(fs, limitField(w.field, add))
		}
	}
	fs = append(fs, limitField(MaxConcurrentField, func(k *LimitKey, n int64) { k.MaxConcurrent = n }))
	return append(fs, boolField(softField, func(k *LimitKey, b bool) { k.Soft = b }), customField(reserveField, readReserve))
}

// limitField is a limit: a positive integer, at most MaxLimit.
func limitField(name string, set func(*LimitKey, int64)) field[LimitKey] {
	return valueField(name, func(path string, v gjson.Result) (int64, error) {
		n, err := readInt(path, v, 1, math.MaxInt64)
		if err == nil && n > MaxLimit {
			return 0, fieldErr(path, "must be at most ", strconv.FormatInt(MaxLimit, 10),
				" (2^53, the largest count Redis's Lua scripts hold exactly), got ", describe(v))
		}
		return n, err
	}, set)
}

// usdLimitField is a money limit: a positive number of US dollars, at most
// MaxUSDLimit, held in nanodollars (rounded to the nanodollar, at least 1).
func usdLimitField(name string, set func(*LimitKey, int64)) field[LimitKey] {
	return valueField(name, func(path string, v gjson.Result) (int64, error) {
		f, err := readNumber(path, v, 0, MaxUSDLimit)
		if err == nil && f == 0 {
			err = fieldErr(path, "must be more than 0 US dollars, got ", describe(v))
		}
		return max(int64(math.Round(f*NanoPerDollar)), 1), err
	}, set)
}

// limitFields returns the names of a limit key's limits, in table order
// (soft and reserve, which qualify them, are not).
func limitFields() []string {
	return slices.DeleteFunc(limitsFields.names(), func(name string) bool { return name == softField || name == reserveField })
}

// ruleItemFields returns the names of a rule item's fields: the limit_by_*
// types (one of which selects the item's type) and limit_keys. A rule item
// has no table of readers: which member is present decides how the others
// read, so parseRuleItem reads it in code.
func ruleItemFields() []string { return append(limitTypeNames(), limitKeysField) }

// limitTypeNames returns the names of the limit_by_* fields, in LimitType
// order.
func limitTypeNames() []string {
	names := make([]string, 0, len(limitTypes))
	for t := ByHeader; int(t) < len(limitTypes); t++ {
		names = append(names, t.String())
	}
	return names
}

// ParseString parses a configuration given as JSON text.
func ParseString(json string) (*Config, error) {
	if !gjson.Valid(json) {
		return nil, invalidJSON([]byte(json))
	}
	return Parse(gjson.Parse(json))
}

// Parse parses and validates a configuration. On failure the error is a
// *FieldError naming the field and the bad value.
//
// When several things are wrong, the first is reported. In each object,
// unknown and duplicate members come first (in document order), then bad
// values (in table order; a nested object is read at its turn); bad
// combinations of top-level fields come last.
func Parse(json gjson.Result) (*Config, error) {
	if json.Raw != "" && !gjson.Valid(json.Raw) {
		return nil, invalidJSON([]byte(json.Raw))
	}
	if !json.IsObject() {
		return nil, fieldErr("", "configuration must be a JSON object, got ", describe(json))
	}
	members, err := readMembers("", json, topFields.names(), isGatewayKey)
	if err != nil {
		return nil, err
	}
	c := newConfig()
	if err := topFields.apply(c, "", members); err != nil {
		return nil, err
	}
	if err := c.checkCombinations(members); err != nil {
		return nil, err
	}
	c.EstimateOptions = c.estimateOptions()
	return c, nil
}

// isGatewayKey reports whether a top-level key is one the gateway adds
// (_rules_, _match_route_...), which the configuration ignores.
func isGatewayKey(key string) bool { return strings.HasPrefix(key, gatewayReservedPrefix) }

// newConfig returns a Config holding the defaults of the optional fields.
func newConfig() *Config {
	return &Config{
		RejectedCode:        DefaultRejectedCode,
		MaxRetryWaitSeconds: DefaultMaxRetryWaitSeconds,
		RejectedMsg:         DefaultRejectedMsg,
		FailureMode:         FailAllow,
		LocalShare:          1,
		LocalMaxSubjects:    DefaultLocalMaxSubjects,
		XFFTrustedHops:      xffTrustedHopsUnset,
		IPv6PrefixLength:    DefaultIPv6PrefixLength,
		MatchMode:           MatchAll,
		AccessLog:           true,
		Redis: Redis{TimeoutMs: DefaultRedisTimeoutMs, BreakerFailures: DefaultBreakerFailures,
			BreakerProbeMs: DefaultBreakerProbeMs, Cluster: true},
		Reservation:    Reservation{DefaultCompletionTokens: DefaultCompletionTokens, MaxBodyBytes: DefaultMaxBodyBytes},
		Cost:           Cost{Weights: Weights{defaultWeight, defaultWeight, defaultWeight, defaultWeight}},
		LeaseSeconds:   DefaultLeaseSeconds,
		MaxQueueWaitMs: DefaultMaxQueueWaitMs,
		ModelSources:   []ModelSource{{Kind: ModelFromBody}, {Kind: ModelFromPath}},
		Calendar:       Calendar{WeekStart: time.Monday},
		Pricing:        Pricing{Catalog: true},
	}
}

// checkCombinations applies the rules between top-level fields, once each
// has been read (members are the top-level members as readMembers returns
// them), and the defaults that depend on another field.
func (c *Config) checkCombinations(members map[string]gjson.Result) error {
	// shadow_mode rejects nothing: an ambiguous body is limited at its most
	// expensive reading, as strictest does, and counted as ambiguous.
	if c.Shadow && c.AmbiguousBody == AmbiguousReject {
		c.AmbiguousBody = AmbiguousStrictest
	}
	// global_threshold and rule_items may be set together (as Higress
	// allows since 2.2.4): every request counts in the first, and each
	// also in the items it matches.
	if !isSet(members[globalField]) && !isSet(members[itemsField]) {
		return fieldErr("", "one of ", globalField, " or ", itemsField, " is required")
	}
	// The unmatched requests are those no rule item matches: without rule
	// items, a threshold for them would be a second global_threshold.
	if isSet(members[unmatchedField]) && !isSet(members[itemsField]) {
		return fieldErr(unmatchedField, "applies only with ", itemsField, ", to the requests no rule item matches: ",
			globalField, " already limits every request")
	}
	if isSet(members[weightsField]) && c.Cost.Strategy != CountWeighted {
		return fieldErr(weightsField, "only used with ", strategyField, ` "`, CountWeighted.String(), `", which is not set`)
	}
	// Only a queue waits: a wait set with reject is a mistake worth refusing.
	if isSet(members[maxQueueWaitField]) && c.OverLimit != Queue {
		return fieldErr(maxQueueWaitField, "applies only with ", overLimitField, ": ", Queue.String())
	}
	for _, f := range []string{localShareField, localMaxField} {
		if isSet(members[f]) && c.FailureMode != FailLocal {
			return fieldErr(f, "applies only with failure_mode: ", FailLocal.String())
		}
	}
	c.markSecretItems()
	if err := c.checkQuotaEndpoints(); err != nil {
		return err
	}
	if err := c.checkPricing(); err != nil {
		return err
	}
	if err := c.checkFallbacks(); err != nil {
		return err
	}
	if err := c.checkPriority(); err != nil {
		return err
	}
	if c.Redis.ServicePort == 0 { // unset: service_port refuses 0
		c.Redis.ServicePort = DefaultRedisPort
		if strings.HasSuffix(c.Redis.ServiceName, StaticServiceSuffix) {
			c.Redis.ServicePort = DefaultRedisStaticPort
		}
	}
	return nil
}

// readGlobal reads global_threshold: a limit key matching every request.
func readGlobal(c *Config, path string, v gjson.Result) (err error) {
	c.Global, err = readThreshold(path, v)
	return err
}

// readUnmatched reads unmatched_threshold: a limit key matching every
// request that no rule item matches, shaped like global_threshold.
func readUnmatched(c *Config, path string, v gjson.Result) (err error) {
	c.Unmatched, err = readThreshold(path, v)
	return err
}

// readThreshold reads a threshold: a limit key without a key, "*".
func readThreshold(path string, v gjson.Result) (*LimitKey, error) {
	k := &LimitKey{Key: AnyKey, Kind: KeyAny}
	if err := globalFields.read(k, path, v); err != nil {
		return nil, err
	}
	return k, k.checkLimits(path)
}

// readRuleItems reads rule_items.
func readRuleItems(c *Config, path string, v gjson.Result) (err error) {
	c.Items, err = readNonEmptyArray(path, v, parseRuleItem)
	return err
}

// readKeyText reads the key of a limit_keys entry as text: a string, or an
// unquoted number (YAML `key: 12345`), whose text Higress takes. What the
// text means depends on the rule item's type: parseLimitKey decides.
func readKeyText(k *LimitKey, path string, v gjson.Result) error {
	switch v.Type {
	case gjson.String:
		k.Key = v.Str
	case gjson.Number:
		k.Key = v.Raw
	default:
		return fieldErr(path, "must be a string, got ", describe(v))
	}
	return nil
}

// readPerModel reads the per_model of a limit key: its limits by model,
// the first entry whose pattern matches a request's model applying.
func readPerModel(k *LimitKey, path string, v gjson.Result) (err error) {
	k.PerModel, err = readNonEmptyArray(path, v, func(path string, v gjson.Result) (LimitKey, error) {
		var e LimitKey
		if err := perModelFields.read(&e, path, v); err != nil {
			return e, err
		}
		return e, e.checkLimits(path)
	})
	return err
}

// readModelPattern reads the model of a per_model entry: an exact name,
// "<prefix>*", "regexp:<re>" or "*", matched as a limit_by_model key is.
func readModelPattern(k *LimitKey, path string, v gjson.Result) error {
	s, err := readString(path, v)
	if err != nil {
		return err
	}
	k.Key = s
	return k.parseKey(path, ByModel)
}

// readModelSources reads model_source: where a request's model is read
// from, in order ("header:<name>", "body", "path"), each at most once.
func readModelSources(c *Config, path string, v gjson.Result) (err error) {
	var seen []ModelSource
	c.ModelSources, err = readNonEmptyArray(path, v, func(path string, v gjson.Result) (ModelSource, error) {
		s, err := parseModelSource(path, v)
		if err == nil && slices.Contains(seen, s) {
			err = fieldErr(path, "duplicate source ", quote(v.Str))
		}
		seen = append(seen, s)
		return s, err
	})
	return err
}

// parseModelSource reads an entry of model_source.
func parseModelSource(path string, v gjson.Result) (ModelSource, error) {
	s, err := readString(path, v)
	if err != nil {
		return ModelSource{}, err
	}
	switch {
	case s == ModelFromBody.String():
		return ModelSource{Kind: ModelFromBody}, nil
	case s == ModelFromPath.String():
		return ModelSource{Kind: ModelFromPath}, nil
	case strings.HasPrefix(s, modelSourceHeaderPrefix):
		h := s[len(modelSourceHeaderPrefix):]
		if !validHeaderName(h) {
			return ModelSource{}, fieldErr(path, "invalid header name ", quote(h), " in ", quote(s))
		}
		return ModelSource{Kind: ModelFromHeader, Header: strings.ToLower(h)}, nil
	}
	return ModelSource{}, fieldErr(path, `must be "`+modelSourceHeaderPrefix+`<name>", "`, ModelFromBody.String(),
		`" or "`, ModelFromPath.String(), `", got `, quote(s))
}

// readModelWeights reads token_weights.models: weights by model name,
// prefix ("claude-opus-4*") or regexp ("regexp:<re>"), in configuration
// order (see parseModelKey). A model's weights start from the token_weights
// ones: it sets only what differs.
func readModelWeights(c *Cost, path string, v gjson.Result) error {
	c.ModelWeights = nil
	err := readModelKeyed(path, "", v, false, func(rule ModelRule, at string, mv gjson.Result) error {
		model := Cost{Weights: c.Weights}
		err := weightFields.read(&model, at, mv)
		rule.Weights = model.Weights
		c.ModelWeights = append(c.ModelWeights, rule)
		return err
	})
	if err == nil {
		c.indexModels()
	}
	return err
}

// readQuotaHeaders reads quota_headers: a list of the forms, each once.
func readQuotaHeaders(c *Config, path string, v gjson.Result) error {
	if !v.IsArray() {
		return fieldErr(path, `must be a list of forms ("tokenratelimit", "openai", "ietf"), got `, describe(v))
	}
	var seen QuotaHeaders
	for i, e := range v.Array() {
		at := path + "[" + strconv.Itoa(i) + "]"
		n, err := readEnum(at, e, quotaHeaderNames)
		if err != nil {
			return err
		}
		if seen&(1<<n) != 0 {
			return fieldErr(at, quote(quotaHeaderNames[n]), " is listed twice")
		}
		seen |= 1 << n
	}
	c.QuotaHeaders |= seen
	return nil
}

// readStreamUsage reads stream_usage: "inject" or "off", or the boolean a
// YAML 1.1 reader (Kubernetes, Higress's console) makes of an unquoted off
// (false) or on (true).
func readStreamUsage(c *Config, path string, v gjson.Result) error {
	switch v.Type {
	case gjson.False:
		c.StreamUsage = StreamUsageOff
		return nil
	case gjson.True:
		c.StreamUsage = StreamUsageInject
		return nil
	}
	n, err := readEnum(path, v, []string{"inject", "off"})
	c.StreamUsage = StreamUsage(n)
	return err
}

// readPasswordEnv reads redis.password_env: the name of an environment
// variable (letters, digits and '_', not starting with a digit), which
// replaces password.
func readPasswordEnv(r *Redis, path string, v gjson.Result) error {
	name, err := readNonEmptyString(path, v)
	if err != nil {
		return err
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || i > 0 && '0' <= c && c <= '9') {
			return fieldErr(path, "must be an environment variable's name (letters, digits and _), got ", quote(name))
		}
	}
	if r.Password != "" {
		return fieldErr(path, "and password cannot both be set: password_env names where the password is")
	}
	r.PasswordEnv = name
	return nil
}
