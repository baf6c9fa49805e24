// Package deploy holds the deployment pieces of the plugin that are not Go
// code, and the tests that keep them valid:
//
//   - ../../envoy.yaml and ../../docker-compose.yml: a local Higress gateway (its
//     Envoy, on a static bootstrap) with the plugin, Redis and a mock LLM;
//   - mockllm.Dockerfile: the mock LLM's image for docker compose;
//   - plugin.Dockerfile: the plugin as an OCI image for Higress (make image);
//   - wasmplugin.yaml: a Higress WasmPlugin resource using that image;
//   - redis.yaml: the Redis that WasmPlugin names, as Kubernetes objects;
//   - atrl.Dockerfile and exporter.yaml: the budget exporter (atrl exporter)
//     as an image, and its Deployment beside the gateway;
//   - grafana-dashboard.json: a Grafana dashboard of the gateway's metrics
//     and the exporter's (spend, tokens, rejections, budgets, Redis);
//   - prometheus-rules.yaml: Prometheus alert rules (budgets at 80 % and
//     100 %, Redis failing or unreachable, the circuit breaker open).
//
// The tests check these files against the Envoy API's validation, the Compose
// specification, the plugin's own configuration parser, redis-server and
// each other, and every query of the dashboard and the rules against the
// metrics a live run of the plugin and the exporter serves, so a typo fails
// `go test ./...` instead of a deployment.
package deploy
