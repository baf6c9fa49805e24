package wasmhost

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/higress-group/proxy-wasm-go-sdk/proxywasm/proxytest"
)

// Forget drops what the host emulator keeps of a stream that is done
// (after CompleteHttpContext): its headers and bodies, its lists of
// callouts (empty once answered), every log line the plugin wrote so far,
// and the properties modules set (see property.go), as Envoy drops a
// stream's filter state; also those at paths, which a plugin run in Go
// mode sets without wasmhost seeing it. The emulator keeps all of them for the life of the host, for a
// test to read back, and a log line's string points into the module's
// memory as it was when written, so that a long run keeps every request's
// bodies and every old copy of the module's memory alive: a gateway keeps
// none of it. Nothing the emulator exports drops them, so Forget reaches
// its fields by name; TestForgetKeepsTheEmulatorFlat fails if an upgrade
// of the SDK renames them. Nothing may be asked of the stream afterwards.
func Forget(host proxytest.HostEmulator, contextID uint32, paths ...string) {
	e := reflect.ValueOf(host)
	if e.Kind() != reflect.Pointer || e.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("wasmhost.Forget: the host emulator is a %T, not the struct it knows", host))
	}
	e = e.Elem()
	id := reflect.ValueOf(contextID)
	deleteKey(field(field(e, "httpHostEmulator").Elem(), "httpStreams"), id)
	root := field(e, "rootHostEmulator").Elem()
	deleteKey(field(root, "redisContextIDToCalloutInfos"), id)
	deleteKey(field(root, "httpContextIDToCalloutInfos"), id)
	logs := field(root, "logs")
	logs.Set(reflect.Zero(logs.Type()))
	properties := field(e, "properties")
	setByModules.Range(func(path, _ any) bool {
		deleteKey(properties, reflect.ValueOf(path))
		return true
	})
	for _, path := range paths {
		deleteKey(properties, reflect.ValueOf(path))
	}
}

// field is a settable view of s's field name, exported or not.
func field(s reflect.Value, name string) reflect.Value {
	f := s.FieldByName(name)
	if !f.IsValid() {
		panic(fmt.Sprintf("wasmhost: the host emulator has no field %s any more (SDK upgraded?)", name))
	}
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

func deleteKey(m, key reflect.Value) {
	if m.Kind() != reflect.Map {
		panic(fmt.Sprintf("wasmhost.Forget: %s is not a map any more (SDK upgraded?)", m.Type()))
	}
	m.SetMapIndex(key, reflect.Value{})
}
