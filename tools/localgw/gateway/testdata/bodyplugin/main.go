// Command bodyplugin is a proxy-wasm plugin for the gateway's own tests. It
// does what the limiter does not do yet, so that the gateway's handling of
// it is tested: it holds the request headers until it has read the whole
// body (HeaderStopIteration, the body buffered chunk by chunk), decides
// after a Redis reply, may answer during the body, may never resume, and
// rewrites responses. The x-test request header chooses:
//
//	body-decides  read the body; "deny" in it → 403, else ask Redis (PING),
//	              then add x-body-bytes and x-redis-said and resume
//	never-resume  pause the request headers for good
//	(absent)      let everything through untouched
//
// With a mode, response headers get x-test-status and bodies are upper-cased.
package main

import (
	"bytes"
	"strconv"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm"
	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/types"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/tidwall/gjson"
)

func main() {}

type config struct{}

const (
	modeKey = "mode"
	cluster = "outbound|6379||redis.static"
)

func init() {
	wrapper.SetCtx("gateway-test",
		wrapper.ParseConfig(func(gjson.Result, *config) error { return proxywasm.RedisInit(cluster, "", "", 1000) }),
		wrapper.ProcessRequestHeaders(onRequestHeaders),
		wrapper.ProcessRequestBody(onRequestBody),
		wrapper.ProcessResponseHeaders(onResponseHeaders),
		wrapper.ProcessStreamingResponseBody(onResponseBody),
	)
}

func onRequestHeaders(ctx wrapper.HttpContext, _ config) types.Action {
	mode, _ := proxywasm.GetHttpRequestHeader("x-test")
	ctx.SetContext(modeKey, mode)
	switch mode {
	case "body-decides":
		return types.HeaderStopIteration
	case "never-resume":
		return types.HeaderStopAllIterationAndWatermark
	}
	ctx.DontReadRequestBody()
	return types.ActionContinue
}

func onRequestBody(ctx wrapper.HttpContext, _ config, body []byte) types.Action {
	if bytes.Contains(body, []byte("deny")) {
		_ = proxywasm.SendHttpResponse(403, [][2]string{{"content-type", "text/plain"}}, []byte("denied by the body"), -1)
		return types.ActionPause
	}
	n := len(body)
	_, err := proxywasm.DispatchRedisCall(cluster, []byte("*1\r\n$4\r\nPING\r\n"), func(status, size int) {
		said := "failed"
		if reply, err := proxywasm.GetRedisCallResponse(0, size); status == 0 && err == nil {
			said = string(bytes.TrimSpace(reply))
		}
		_ = proxywasm.AddHttpRequestHeader("x-body-bytes", strconv.Itoa(n))
		_ = proxywasm.AddHttpRequestHeader("x-redis-said", said)
		_ = proxywasm.ResumeHttpRequest()
	})
	if err != nil {
		return types.ActionContinue
	}
	return types.ActionPause
}

func onResponseHeaders(ctx wrapper.HttpContext, _ config) types.Action {
	if ctx.GetContext(modeKey) != "" {
		status, _ := proxywasm.GetHttpResponseHeader(":status")
		_ = proxywasm.AddHttpResponseHeader("x-test-status", status)
		_ = proxywasm.RemoveHttpResponseHeader("content-length")
	}
	return types.ActionContinue
}

func onResponseBody(ctx wrapper.HttpContext, _ config, chunk []byte, _ bool) []byte {
	if ctx.GetContext(modeKey) != "" {
		return bytes.ToUpper(chunk)
	}
	return chunk
}
