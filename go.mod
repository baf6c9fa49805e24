module github.com/tokenlimit/ai-token-ratelimit

go 1.24.1

require (
	github.com/goccy/go-yaml v1.19.2
	github.com/higress-group/proxy-wasm-go-sdk v0.0.0-20251103120604-77e9cce339d2
	github.com/higress-group/wasm-go v1.1.1
	github.com/stretchr/testify v1.10.0
	github.com/tetratelabs/wazero v1.10.1
	github.com/tidwall/gjson v1.18.0
	github.com/tidwall/resp v0.1.1
	github.com/tidwall/sjson v1.2.5
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kr/pretty v0.3.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/rogpeppe/go-internal v1.12.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
