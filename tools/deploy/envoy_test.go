package deploy

import (
	"fmt"
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	wasmfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/wasm/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/higress-group/wasm-go/pkg/wrapper"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	// Every typed_config type in envoy.yaml, so its Any resolves.
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

const (
	hcmFilterName    = "envoy.filters.network.http_connection_manager"
	wasmFilterName   = "envoy.filters.http.wasm"
	routerFilterName = "envoy.filters.http.router"
	wasmRuntimeV8    = "envoy.wasm.runtime.v8"
	llmCluster       = "llm"
)

// loadBootstrap reads envoy.yaml as Envoy does: YAML to JSON, then the proto
// JSON mapping, refusing unknown fields and unknown Any types.
func loadBootstrap(t *testing.T) *bootstrapv3.Bootstrap {
	t.Helper()
	var b bootstrapv3.Bootstrap
	require.NoError(t, protojson.Unmarshal(yamlToJSON(t, readRepoFile(t, "envoy.yaml")), &b), "envoy.yaml")
	return &b
}

type validator interface{ ValidateAll() error }

// validateDeep runs the API's validation (the protoc-gen-validate rules Envoy
// enforces) on m and on the content of every Any inside it, which ValidateAll
// alone does not look into.
func validateDeep(t *testing.T, path string, m proto.Message) {
	t.Helper()
	if v, ok := m.(validator); ok {
		require.NoError(t, v.ValidateAll(), "%s", path)
	} else {
		t.Fatalf("%s: %T has no validation", path, m)
	}
	forEachAny(t, path, m.ProtoReflect())
}

func forEachAny(t *testing.T, path string, m protoreflect.Message) {
	t.Helper()
	if a, ok := m.Interface().(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		require.NoError(t, err, "%s: %s", path, a.GetTypeUrl())
		switch inner.(type) {
		case *wrapperspb.StringValue: // the plugin configuration, checked below
			return
		}
		validateDeep(t, path+"("+a.GetTypeUrl()+")", inner)
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				forEachAny(t, fmt.Sprintf("%s[%d]", p, i), v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				forEachAny(t, p+"["+k.String()+"]", mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			forEachAny(t, p, v.Message())
		}
		return true
	})
}

// envoyParts are the pieces of envoy.yaml the tests look at.
type envoyParts struct {
	bootstrap *bootstrapv3.Bootstrap
	listener  *listenerv3.Listener
	hcm       *hcmv3.HttpConnectionManager
	wasm      *wasmfilterv3.Wasm
	clusters  map[string]*clusterv3.Cluster
}

func loadEnvoyParts(t *testing.T) envoyParts {
	t.Helper()
	b := loadBootstrap(t)
	p := envoyParts{bootstrap: b, clusters: map[string]*clusterv3.Cluster{}}
	for _, c := range b.GetStaticResources().GetClusters() {
		require.NotContains(t, p.clusters, c.GetName(), "duplicate cluster")
		p.clusters[c.GetName()] = c
	}
	listeners := b.GetStaticResources().GetListeners()
	require.Len(t, listeners, 1)
	p.listener = listeners[0]
	chains := p.listener.GetFilterChains()
	require.Len(t, chains, 1)
	filters := chains[0].GetFilters()
	require.Len(t, filters, 1)
	require.Equal(t, hcmFilterName, filters[0].GetName())
	p.hcm = &hcmv3.HttpConnectionManager{}
	require.NoError(t, filters[0].GetTypedConfig().UnmarshalTo(p.hcm))

	httpFilters := p.hcm.GetHttpFilters()
	require.GreaterOrEqual(t, len(httpFilters), 2)
	require.Equal(t, routerFilterName, httpFilters[len(httpFilters)-1].GetName(), "the router must be the last HTTP filter")
	for _, f := range httpFilters {
		if f.GetName() == wasmFilterName {
			require.Nil(t, p.wasm, "one wasm filter expected")
			p.wasm = &wasmfilterv3.Wasm{}
			require.NoError(t, f.GetTypedConfig().UnmarshalTo(p.wasm))
		}
	}
	require.NotNil(t, p.wasm, "no %s filter", wasmFilterName)
	return p
}

// pluginConfigJSON is the plugin configuration inlined in the wasm filter.
func (p envoyParts) pluginConfigJSON(t *testing.T) string {
	t.Helper()
	var s wrapperspb.StringValue
	require.NoError(t, p.wasm.GetConfig().GetConfiguration().UnmarshalTo(&s),
		"the plugin configuration must be a google.protobuf.StringValue")
	return s.GetValue()
}

func socketAddress(t *testing.T, c *clusterv3.Cluster) *corev3.SocketAddress {
	t.Helper()
	eps := c.GetLoadAssignment().GetEndpoints()
	require.Len(t, eps, 1, "cluster %s", c.GetName())
	lbs := eps[0].GetLbEndpoints()
	require.Len(t, lbs, 1, "cluster %s", c.GetName())
	sa := lbs[0].GetEndpoint().GetAddress().GetSocketAddress()
	require.NotNil(t, sa, "cluster %s", c.GetName())
	return sa
}

// envoy.yaml is a valid bootstrap by the Envoy API's own rules, down to every
// typed_config.
func TestEnvoyBootstrapIsValid(t *testing.T) {
	validateDeep(t, "envoy.yaml", loadBootstrap(t))
}

func TestEnvoyListenerRoutesToTheMockLLM(t *testing.T) {
	p := loadEnvoyParts(t)
	sa := p.listener.GetAddress().GetSocketAddress()
	require.Equal(t, "0.0.0.0", sa.GetAddress())
	require.EqualValues(t, listenerPort, sa.GetPortValue())

	// Every route goes to a defined cluster, and there is one to the LLM.
	var toLLM bool
	for _, vh := range p.hcm.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			a, ok := r.GetAction().(*routev3.Route_Route)
			require.True(t, ok, "route %v is not a cluster route", r.GetMatch())
			c := a.Route.GetCluster()
			require.Contains(t, p.clusters, c, "route to an undefined cluster")
			toLLM = toLLM || c == llmCluster
		}
	}
	require.True(t, toLLM, "no route to the %s cluster", llmCluster)

	llm := socketAddress(t, p.clusters[llmCluster])
	require.Equal(t, mockLLMService, llm.GetAddress())
	require.EqualValues(t, mockLLMPort, llm.GetPortValue())
	require.Equal(t, llmCluster, p.clusters[llmCluster].GetLoadAssignment().GetClusterName())
}

func TestEnvoyLoadsThePlugin(t *testing.T) {
	p := loadEnvoyParts(t)
	vm := p.wasm.GetConfig().GetVmConfig()
	require.Equal(t, wasmRuntimeV8, vm.GetRuntime())
	require.Equal(t, pluginWasmPath, vm.GetCode().GetLocal().GetFilename())

	js := p.pluginConfigJSON(t)
	cfg, err := config.ParseString(js)
	require.NoError(t, err, "the plugin refuses the configuration in envoy.yaml")
	// The README's docker compose walk-through counts on these numbers: two
	// answers of 5 tokens, then a 429.
	require.EqualValues(t, 10, gjson.Get(js, "rule_items.0.limit_keys.0.token_per_minute").Int(), "update the README's compose demo too")
	require.NotEmpty(t, cfg.Items, "the demo limits per header")
	require.Equal(t, config.ByPerHeader, cfg.Items[0].Type, "the demo limits per header value")
	require.Equal(t, "x-api-key", cfg.Items[0].Name, "the demo limits per x-api-key")
	require.NotZero(t, cfg.QuotaHeaders&config.QuotaHeadersTokenRateLimit, "the demo shows the quota headers")
}

// The plugin dials Redis through the cluster outbound|<port>||<service_name>:
// envoy.yaml must define exactly that cluster, pointing at compose's redis.
func TestEnvoyRedisClusterIsTheOneThePluginDials(t *testing.T) {
	p := loadEnvoyParts(t)
	cfg, err := config.ParseString(p.pluginConfigJSON(t))
	require.NoError(t, err)
	name := wrapper.FQDNCluster{FQDN: cfg.Redis.ServiceName, Port: int64(cfg.Redis.ServicePort)}.ClusterName()
	c, ok := p.clusters[name]
	require.True(t, ok, "envoy.yaml has no cluster %q, the one the plugin dials (clusters: %v)", name, clusterNames(p))
	require.Equal(t, name, c.GetLoadAssignment().GetClusterName())
	sa := socketAddress(t, c)
	require.Equal(t, redisService, sa.GetAddress())
	require.EqualValues(t, redisPort, sa.GetPortValue())
}

func clusterNames(p envoyParts) []string {
	var n []string
	for k := range p.clusters {
		n = append(n, k)
	}
	return n
}
