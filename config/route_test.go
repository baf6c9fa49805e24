package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The model a route addresses: the path decides, a route whose model
// cannot be told says so, and other paths leave it to the body.
func TestRouteModel(t *testing.T) {
	c := mustParse(t, withGlobal(`,"deployments":{"my-gpt4o":"gpt-4o","mini":"gpt-4o-mini"}`))
	for _, tt := range []struct {
		path, model string
		addressed   bool
	}{
		{"/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", "gemini-2.5-pro", true},
		{"/v1/projects/p/locations/us/publishers/google/models/gemini-2.0-flash:generateContent", "gemini-2.0-flash", true},
		{"/v1beta/tunedModels/my-tuned-1:generateContent", "", true},
		{"/v1/projects/p/locations/us/endpoints/123456:predict", "", true},
		{"/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse", "anthropic.claude-3-5-sonnet-20240620-v1:0", true},
		{"/model/us.amazon.nova-pro-v1:0/converse-stream", "us.amazon.nova-pro-v1:0", true},
		{"/model/meta.llama3-70b-instruct-v1:0/invoke-with-response-stream", "meta.llama3-70b-instruct-v1:0", true},
		{"/openai/deployments/my-gpt4o/chat/completions?api-version=2024-10-21", "gpt-4o", true},
		{"/openai/deployments/%6Dini/chat/completions", "gpt-4o-mini", true},
		{"/openai/deployments/other/chat/completions", "", true},
		{"/v1/chat/completions", "", false},
		{"/v1/messages", "", false},
		{"/v1/models/gpt-4o", "", false},
		{"/model/x/other", "", false},
		{"/deployments/x/chat/completions", "", false},
		{"", "", false},
	} {
		route := c.Route(tt.path)
		require.Equal(t, tt.model, route.Model, tt.path)
		require.Equal(t, tt.addressed, route.Addressed, tt.path)
	}
	require.Equal(t, 0.0, testing.AllocsPerRun(100, func() { c.Route("/openai/deployments/my-gpt4o/chat/completions") }))

	for _, tt := range []struct{ json, want string }{
		{withGlobal(`,"deployments":[]`), "deployments: must be an object of deployment names and the models they deploy, got array"},
		{withGlobal(`,"deployments":{"":"gpt-4o"}`), "deployments: deployment names must not be empty"},
		{withGlobal(`,"deployments":{"a":""}`), "deployments.a: must not be empty"},
		{withGlobal(`,"deployments":{"a":"x","a":"y"}`), "deployments.a: duplicate field"},
	} {
		_, err := ParseString(tt.json)
		require.ErrorContains(t, err, tt.want)
	}
}
