# atrl, the operators' command (cmd/atrl), as an image: tools/deploy/exporter.yaml
# runs its budget exporter (atrl exporter) beside the gateway. A static
# binary on an empty image: nothing else in it, run as a user without a
# home or a shell (65532). Build context: the repo root:
#
#   docker build -f tools/deploy/atrl.Dockerfile -t registry.example.com/plugins/atrl:1.0.0 .
#   docker push registry.example.com/plugins/atrl:1.0.0
FROM golang:1.24 AS build
WORKDIR /src
COPY . .
# go build fetches only the modules the command needs (not the test-only ones).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -o /out/atrl ./cmd/atrl

FROM scratch
COPY --from=build /out/atrl /atrl
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/atrl"]
