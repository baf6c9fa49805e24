package config

import (
	"slices"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/estimate"
)

// The model a route names. Some APIs address the model in the request's
// path, and their upstreams ignore any "model" in the body: Gemini and
// Vertex AI (…/models/<model>:<method>), Amazon Bedrock
// (/model/<model id>/converse, /invoke…), Azure OpenAI
// (/openai/deployments/<deployment>/…, a deployment of a model). On such a
// route the path decides the request's model, for its limits, its price,
// its weights and its metrics; a route that addresses a model the plugin
// cannot name (a Gemini tuned model, a Vertex AI endpoint, an Azure
// deployment deployments does not map) is of UnknownModel, limited and
// priced the strictest way: never the body's word.

// bedrockActions are the last segments of Amazon Bedrock's runtime paths
// after /model/<model id>.
var bedrockActions = []string{"converse", "converse-stream", "invoke", "invoke-with-response-stream"}

// Route is what a request's path says of its model.
type Route struct {
	// Model is the model the path addresses: "" for a route whose model
	// cannot be told (see above), or a path that addresses none.
	Model string
	// Addressed says the path addresses a model: it decides the request's,
	// never the body.
	Addressed bool
	// Gemini says the path is a Gemini or Vertex AI one that names its
	// model (…/models/<model>:<method>, estimate.ModelFromPath): the
	// request speaks Gemini's API (estimate.RouteDialect), and another
	// model can take its place in the path (estimate.ReplacePathModel).
	Gemini bool
	// Provider is the provider, as the price catalog names them, that
	// serves a path that addresses a model: google (Gemini, Vertex AI), aws
	// (Bedrock), azure (Azure OpenAI); "" for a path that addresses none.
	Provider string
}

// Route reads the model the request's path (its :path, with any query)
// addresses, if any. A path that addresses no model (OpenAI's
// /v1/chat/completions, Anthropic's /v1/messages) gives the zero Route:
// the body names the model there. Segments are read percent-decoded, as
// upstreams route them. It allocates only for a segment with escapes.
func (c *Config) Route(path string) Route {
	if m := estimate.ModelFromPath(path); m != "" {
		return Route{Model: m, Addressed: true, Gemini: true, Provider: "google"}
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	var seg [4]string // the last segments read: seg[0] the latest
	for rest := path; rest != ""; {
		var s string
		s, rest = nextSegment(rest)
		if s == "" {
			continue
		}
		seg[3], seg[2], seg[1], seg[0] = seg[2], seg[1], seg[0], decodePath(s)
		switch {
		case (seg[1] == "tunedModels" || seg[1] == "endpoints") && strings.Contains(seg[0], ":"):
			return Route{Addressed: true, Provider: "google"} // a tuned model, a Vertex AI endpoint: which model it is, only Google knows
		case seg[2] == "model" && seg[1] != "" && slices.Contains(bedrockActions, seg[0]):
			return Route{Model: seg[1], Addressed: true, Provider: "aws"}
		case seg[2] == "openai" && seg[1] == "deployments" && seg[0] != "":
			return Route{Model: c.Deployments[seg[0]], Addressed: true, Provider: "azure"}
		}
	}
	return Route{}
}

// readDeployments reads deployments: Azure OpenAI deployments and the
// model each deploys ({my-gpt4o: gpt-4o}).
func readDeployments(c *Config, path string, v gjson.Result) (err error) {
	if !v.IsObject() {
		return fieldErr(path, "must be an object of deployment names and the models they deploy, got ", describe(v))
	}
	c.Deployments = map[string]string{}
	v.ForEach(func(k, mv gjson.Result) bool {
		name, at := k.String(), child(path, k.String())
		switch _, seen := c.Deployments[name]; {
		case name == "":
			err = fieldErr(path, "deployment names must not be empty")
		case seen:
			err = fieldErr(at, "duplicate field")
		}
		if err != nil {
			return false
		}
		c.Deployments[name], err = readNonEmptyString(at, mv)
		return err == nil
	})
	return err
}
