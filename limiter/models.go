package limiter

import (
	"github.com/higress-group/wasm-go/pkg/wrapper"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// Budgets per model. When the configuration has model limits (per_model,
// limit_by_model, limit_by_per_model), a request's model comes from the
// first of model_source's sources that has one: a request header, the
// body's "model" (read the way upstreams read it, see estimate.Request) or
// a Gemini/Vertex path. A route that addresses a model in its path
// (config.Config.Route) decides it in place of the body and path sources:
// its upstream never reads the body's. A body source that has to be read
// makes the request wait for its body before it is even matched: the model
// decides which limits apply. Without model limits, the model is the
// route's, else the body's, resolved once the body is estimated, where the
// request's cost needs it (per-model weights or prices, fallbacks). The
// model so resolved is also the model of per-model weights, prices,
// metrics and the access log.

// requestModel is the model a request names, resolved once where it can
// be known (resolveModel: at the headers, once the body is read) and kept
// with what the request matched: its per-model limits, weights, prices,
// metrics, access log and fallbacks read it.
type requestModel struct {
	name   string   // the model ("": none named, or not resolved; config.UnknownModel: it cannot be told)
	others []string // the other models an ambiguous body may name: the request counts as each (ambiguity.go)
	// route is what the request's path says of its model, once read
	// (routeRead): see routeOf.
	route     config.Route
	routeRead bool
	// provider is the provider the route serves, for prices, once read
	// (providerRead): see request.priceProvider.
	provider     string
	providerRead bool
	// unread says name is config.UnknownModel because the body, which may
	// name a model, cannot be read (compressed in a coding the limiter
	// does not decode): a route whose model cannot be told is unknown too,
	// but no body's doing.
	unread bool
}

// routeOf is what the request's path says of its model, read once for the
// request (the one reading of a route for its model): by the first body or
// path source, for the API its body is read as (estimate.RouteDialect), or
// for the API its rejection speaks (apiOf).
func (m *requestModel) routeOf(rules *config.Config, path string) config.Route {
	if !m.routeRead {
		m.route, m.routeRead = rules.Route(path), true
	}
	return m.route
}

// routeThenBody are the sources of the model without model limits, where
// model_source does not apply: the route's (read before a body source),
// else the body's.
var routeThenBody = []config.ModelSource{{Kind: config.ModelFromBody}}

// resolveModel resolves the request's model into m at one point of its
// life: at its headers (body nil), from the sources before the first body
// source, or once its body is estimated (body), from the body's and the
// sources after it. With model limits the sources are model_source's, else
// routeThenBody. needBody (at the headers) says the body must be read
// first: the sources before it gave nothing, and the request has a body
// that can be read (readable). A body that cannot be read may name a model
// all the same: when no source names one, the model is config.UnknownModel
// (m.unread). An estimate's model is config.UnknownModel when it cannot be
// told, with the other models an ambiguous body may name.
func (pc PluginConfig) resolveModel(ctx wrapper.HttpContext, m *requestModel, path string, body *estimate.Estimate, readable bool) (needBody bool) {
	sources := routeThenBody
	if pc.modelLimits {
		sources = pc.rules.ModelSources
	}
	unread, afterBody := false, false
	for _, s := range sources {
		if s.Kind == config.ModelFromHeader {
			if body != nil && !afterBody {
				continue // read at the headers: it named none
			}
			if v := requestHeader(s.Header); v != "" {
				m.name = v
				return false
			}
			continue
		}
		// A body or path source: a route that addresses a model decides it
		// for both (its upstream ignores the body's); a path that
		// addresses none names none (Route reads Gemini's too).
		if route := m.routeOf(pc.rules, path); route.Addressed {
			m.name = route.Model
			if m.name == "" {
				m.name = config.UnknownModel // limited and priced the strictest way
			}
			return false
		}
		if s.Kind != config.ModelFromBody {
			continue
		}
		switch {
		case body != nil:
			if body.UnknownModel {
				m.name = config.UnknownModel
				return false
			}
			if body.Model != "" {
				var others []string
				for _, other := range body.OtherModels {
					if other != "" {
						others = append(others, other)
					}
				}
				m.name, m.others = body.Model, others
				return false
			}
			afterBody = true
		case readable:
			return true
		default:
			unread = ctx.HasRequestBody() && !opensWebSocket(ctx)
		}
	}
	if unread {
		m.name, m.unread = config.UnknownModel, true
	}
	return false
}

// servedModel is the model the request is limited, charged and counted
// as: the fallback it is served as, once admitted as one (servedAs), else
// the one it names.
func (m *matched) servedModel() string {
	if m.servedAs != "" {
		return m.servedAs
	}
	return m.model.name
}

// modelRequest is a request with its resolved model, for the rules' model
// limits.
type modelRequest struct {
	hostRequest
	model string
}

func (m modelRequest) Model() string { return m.model }

// request is what the rules read of the request: with model limits, its
// model too.
func (pc PluginConfig) request(ctx wrapper.HttpContext, model string) config.Request {
	if !pc.modelLimits {
		return hostRequest{ctx}
	}
	return modelRequest{hostRequest{ctx}, model}
}

// matchRequest matches the request against the rules, with its model when
// the configuration has model limits: as each model it may name (the
// others of an ambiguous body), every limit that any of them matches, each
// subject once (see config.AddMatch).
func (pc PluginConfig) matchRequest(ctx wrapper.HttpContext, model string, others []string) []config.Match {
	matches := pc.rules.MatchAll(pc.request(ctx, model), nil)
	if !pc.modelLimits {
		return matches
	}
	for _, other := range others {
		for _, m := range pc.rules.MatchAll(modelRequest{hostRequest{ctx}, other}, nil) {
			matches = config.AddMatch(matches, m)
		}
	}
	return matches
}
