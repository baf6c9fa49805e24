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
// a Gemini/Vertex path. A body source that has to be read makes the
// request wait for its body before it is even matched: the model decides
// which limits apply. The model so resolved is also the model of per-model
// weights and metrics.

// modelAtHeaders resolves the model from the sources before the first body
// source. needBody says the body must be read first: the sources before it
// gave nothing and the request has a body that can be read.
func (pc PluginConfig) modelAtHeaders(ctx wrapper.HttpContext, readable bool) (model string, needBody bool) {
	for _, s := range pc.rules.ModelSources {
		if s.Kind == config.ModelFromBody {
			if readable {
				return "", true
			}
			continue
		}
		if m := modelFrom(ctx, s); m != "" {
			return m, false
		}
	}
	return "", false
}

// modelAfterBody resolves the model once the body has been read: bodyModel
// is the body's (""), then the sources after the body's.
func (pc PluginConfig) modelAfterBody(ctx wrapper.HttpContext, bodyModel string) string {
	afterBody := false
	for _, s := range pc.rules.ModelSources {
		switch {
		case s.Kind == config.ModelFromBody:
			if bodyModel != "" {
				return bodyModel
			}
			afterBody = true
		case afterBody:
			if m := modelFrom(ctx, s); m != "" {
				return m
			}
		}
	}
	return ""
}

// modelFrom reads the model from a header or path source.
func modelFrom(ctx wrapper.HttpContext, s config.ModelSource) string {
	switch s.Kind {
	case config.ModelFromHeader:
		return requestHeader(s.Header)
	case config.ModelFromPath:
		return estimate.ModelFromPath(ctx.Path())
	}
	return ""
}

// modelRequest is a request with its resolved model, for the rules' model
// limits.
type modelRequest struct {
	hostRequest
	model string
}

func (m modelRequest) Model() string { return m.model }

// matchRequest matches the request against the rules, with its model when
// the configuration has model limits.
func (pc PluginConfig) matchRequest(ctx wrapper.HttpContext, model string) []config.Match {
	if !pc.modelLimits {
		return pc.rules.MatchAll(hostRequest{ctx}, nil)
	}
	return pc.rules.MatchAll(modelRequest{hostRequest{ctx}, model}, nil)
}
