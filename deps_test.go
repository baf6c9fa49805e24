package main

import (
	_ "github.com/higress-group/wasm-go/pkg/test"
	_ "github.com/higress-group/wasm-go/pkg/wrapper"
	_ "github.com/stretchr/testify/require"
	_ "github.com/tidwall/gjson"
	_ "github.com/tidwall/resp"
)
