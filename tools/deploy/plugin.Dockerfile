# The plugin as an OCI image for Higress (WasmPlugin url: oci://...): Higress
# pulls the image and loads the layer's plugin.wasm. Build with `make image`
# (after `make build`), push with `make push IMAGE=<registry>/ai-token-ratelimit:<version>`.
FROM scratch
COPY main.wasm plugin.wasm
