package wasmhost

import (
	"context"
	"sync"
	"unsafe" // and go:linkname, below

	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

// The emulator's proxy_set_property keeps the path and the value it is
// given as views of the module's memory (the key of its map of properties
// a string over the module's bytes): the module frees and reuses them
// after the call, so a property the module set (the plugin's ai_log, see
// limiter/accesslog.go) reads back as whatever the module later wrote
// there, and a key that changed under the map is found no more. Envoy
// copies both. So every call the module makes is followed by the same
// call from the host with copies, which replaces the entry (a map
// assignment with an equal string key stores the new key too).
//
// A property a module sets from a stream is that stream's in Envoy (its
// filter state, wasm.<path>): the next stream starts without it. The
// emulator has one map of properties for every stream, so Forget drops the
// properties modules set (setByModules) when a stream is done; streams in
// flight at once still see each other's.

// setByModules holds the path of every property a module set, for Forget.
var setByModules sync.Map // string → struct{}

//go:linkname proxySetProperty github.com/higress-group/proxy-wasm-go-sdk/proxywasm/internal.ProxySetProperty
func proxySetProperty(pathData *byte, pathSize int32, valueData *byte, valueSize int32) uint32

// propertyCopies gives the host module's proxy_set_property a listener
// that stores a copy of what the module set.
type propertyCopies struct{}

func (propertyCopies) NewFunctionListener(def api.FunctionDefinition) experimental.FunctionListener {
	if def.Name() != "proxy_set_property" {
		return nil
	}
	return &propertyCopier{}
}

// propertyCopier copies what one call of proxy_set_property set, once the
// emulator has set it.
type propertyCopier struct {
	mod    api.Module
	params [4]uint32 // path data, path size, value data, value size
}

func (c *propertyCopier) Before(_ context.Context, mod api.Module, _ api.FunctionDefinition, params []uint64, _ experimental.StackIterator) {
	c.mod = mod
	for i := range c.params {
		c.params[i] = uint32(params[i])
	}
}

func (c *propertyCopier) After(_ context.Context, _ api.Module, _ api.FunctionDefinition, results []uint64) {
	mod := c.mod
	c.mod = nil
	if mod == nil || len(results) == 0 || results[0] != 0 || c.params[1] == 0 || c.params[3] == 0 {
		return // refused, or nothing to copy
	}
	path, ok1 := mod.Memory().Read(c.params[0], c.params[1])
	value, ok2 := mod.Memory().Read(c.params[2], c.params[3])
	if !ok1 || !ok2 {
		return
	}
	path, value = append([]byte(nil), path...), append([]byte(nil), value...)
	setByModules.Store(string(path), struct{}{})
	proxySetProperty(unsafe.SliceData(path), int32(len(path)), unsafe.SliceData(value), int32(len(value)))
}

func (c *propertyCopier) Abort(context.Context, api.Module, api.FunctionDefinition, error) {
	c.mod = nil
}
