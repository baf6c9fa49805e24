# The plugin as an OCI image for Higress (tools/deploy/plugin.Dockerfile, tools/deploy/wasmplugin.yaml).
#   make image                                   # builds main.wasm, then $(IMAGE)
#   make push IMAGE=registry.example.com/plugins/ai-token-ratelimit:1.0.0
DOCKER ?= docker
IMAGE ?= ai-token-ratelimit:dev

.PHONY: image push

image: build
	$(DOCKER) build -f tools/deploy/plugin.Dockerfile -t $(IMAGE) .

push: image
	$(DOCKER) push $(IMAGE)
