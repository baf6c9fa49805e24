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
// (config.Config.RouteModel) decides it in place of the body and path
// sources: its upstream never reads the body's. A body source that has to be read makes the
// request wait for its body before it is even matched: the model decides
// which limits apply. The model so resolved is also the model of per-model
// weights and metrics.

// modelAtHeaders resolves the model from the sources before the first body
// source. needBody says the body must be read first: the sources before it
// gave nothing and the request has a body that can be read.
//
// A body that cannot be read (compressed in a coding the limiter does not
// decompress) may name a model all the same: when no source names one,
// the model is config.UnknownModel, and unreadBody says so (a route whose
// model cannot be told is config.UnknownModel too, but no body's doing).
func (pc PluginConfig) modelAtHeaders(ctx wrapper.HttpContext, readable bool) (model string, needBody, unreadBody bool) {
	unread, routeRead := false, false
	for _, s := range pc.rules.ModelSources {
		if s.Kind == config.ModelFromHeader {
			if m := requestHeader(s.Header); m != "" {
				return m, false, false
			}
			continue
		}
		// The first body or path source: a route that addresses a model
		// decides it for both (its upstream ignores the body's); a path
		// that addresses none names none (RouteModel reads Gemini's too).
		if !routeRead {
			routeRead = true
			if route, addressed := pc.routeModel(ctx.Path()); addressed {
				return route, false, false
			}
		}
		if s.Kind == config.ModelFromBody {
			if readable {
				return "", true, false
			}
			unread = ctx.HasRequestBody() && !opensWebSocket(ctx)
		}
	}
	if unread {
		return config.UnknownModel, false, true
	}
	return "", false, false
}

// modelAfterBody resolves the model once the body has been read: the
// body's (with the other models an ambiguous body may name), then the
// sources after the body's.
func (pc PluginConfig) modelAfterBody(ctx wrapper.HttpContext, body estimate.Estimate) (model string, others []string) {
	afterBody := false
	for _, s := range pc.rules.ModelSources {
		switch {
		case s.Kind == config.ModelFromBody:
			if m, others := modelsOf(body); m != "" {
				return m, others
			}
			afterBody = true
		case afterBody && s.Kind == config.ModelFromHeader: // a path source names none: see modelAtHeaders
			if m := requestHeader(s.Header); m != "" {
				return m, nil
			}
		}
	}
	return "", nil
}

// routeModel is the model the request's path addresses, if it addresses
// one (see config.Config.RouteModel): config.UnknownModel for a route
// whose model cannot be told, limited and priced the strictest way.
func (pc PluginConfig) routeModel(path string) (model string, addressed bool) {
	model, addressed = pc.rules.RouteModel(path)
	if addressed && model == "" {
		model = config.UnknownModel
	}
	return model, addressed
}

// modelOf is the request's model (and the others an ambiguous body may
// name) from its estimate, where model limits do not resolve it through
// model_source: the route's when it addresses one, else the body's.
func (pc PluginConfig) modelOf(path string, e estimate.Estimate) (model string, others []string) {
	if route, addressed := pc.routeModel(path); addressed {
		return route, nil
	}
	return modelsOf(e)
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
