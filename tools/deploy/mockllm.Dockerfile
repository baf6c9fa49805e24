# The mock LLM of docker-compose.yml (service mockllm): an OpenAI-compatible
# server that reports token usage, built from tools/mockllm of this repo.
# Build context: the repo root, as the tools module replaces the plugin with
# it (docker compose does this; by hand:
# docker build -f tools/deploy/mockllm.Dockerfile .).
FROM golang:1.24 AS build
WORKDIR /src
COPY . .
# go build fetches only the modules the command needs (not the test-only ones).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    cd tools && CGO_ENABLED=0 go build -trimpath -o /out/mockllm ./mockllm

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/mockllm /mockllm
EXPOSE 8080
ENTRYPOINT ["/mockllm", "-listen", "0.0.0.0:8080"]
