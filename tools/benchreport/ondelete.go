package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A gateway deletes each HTTP context when its stream is done: Envoy calls
// the module's proxy_on_log, then proxy_on_delete, and the SDK drops the
// context (and all the plugin holds for the request) from its maps. The
// host emulator calls only proxy_on_log in a WASM module, so in a long run
// every request stays live in the module: its heap grows without end, the
// collector marks more at every cycle, and the module's memory keeps
// growing (wazero copies all of it on each growth). That is not a cost a
// gateway pays, and it grows with what a plugin keeps per request, so it
// hits the plugin harder than the do-nothing plugin.
//
// deleteAfterLog rewrites a module so that its proxy_on_log export also
// deletes the context, as the gateway would right after: a function of
// the same type is appended that calls the module's proxy_on_log and then
// its proxy_on_delete, and the proxy_on_log export names it. Nothing else
// of the module changes (appending a function shifts no index).
func deleteAfterLog(module []byte) ([]byte, error) {
	if len(module) < 8 || string(module[:4]) != "\x00asm" {
		return nil, errors.New("not a WASM module")
	}
	type section struct {
		id         byte
		start, end int // its contents
	}
	var sections []section
	for i := 8; i < len(module); {
		id := module[i]
		size, n := binary.Uvarint(module[i+1:])
		if n <= 0 || i+1+n+int(size) > len(module) {
			return nil, fmt.Errorf("section at %d: bad size", i)
		}
		start := i + 1 + n
		sections = append(sections, section{id, start, start + int(size)})
		i = start + int(size)
	}
	find := func(id byte) (section, error) {
		for _, s := range sections {
			if s.id == id {
				return s, nil
			}
		}
		return section{}, fmt.Errorf("no section %d", id)
	}
	imports, err := find(2)
	if err != nil {
		return nil, err
	}
	functions, err := find(3)
	if err != nil {
		return nil, err
	}
	exports, err := find(7)
	if err != nil {
		return nil, err
	}
	if _, err := find(10); err != nil { // the code section, where the new body goes
		return nil, err
	}

	// Functions imported come first in the index space.
	importedFunctions := 0
	r := reader{b: module[imports.start:imports.end]}
	for range r.uint() {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0: // a function: its type
			r.uint()
			importedFunctions++
		case 1: // a table: its element type and limits
			r.byte()
			r.limits()
		case 2: // a memory: its limits
			r.limits()
		case 3: // a global: its type and mutability
			r.byte()
			r.byte()
		default:
			return nil, fmt.Errorf("import of kind %d", kind)
		}
	}
	r = reader{b: module[functions.start:functions.end]}
	types := make([]uint64, r.uint())
	for i := range types {
		types[i] = r.uint()
	}
	r = reader{b: module[exports.start:exports.end]}
	logIndex, deleteIndex, logAt := -1, -1, -1
	for range r.uint() {
		name := r.name()
		kind := r.byte()
		at := r.at
		index := int(r.uint())
		switch {
		case kind == 0 && name == "proxy_on_log":
			logIndex, logAt = index, at
		case kind == 0 && name == "proxy_on_delete":
			deleteIndex = index
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	if logIndex < importedFunctions || deleteIndex < importedFunctions {
		return nil, errors.New("the module exports no proxy_on_log and proxy_on_delete of its own")
	}
	logType := types[logIndex-importedFunctions]
	if logType != types[deleteIndex-importedFunctions] {
		return nil, errors.New("proxy_on_log and proxy_on_delete differ in type")
	}
	added := importedFunctions + len(types)

	// The new function's body: no locals; proxy_on_log(id); proxy_on_delete(id).
	body := []byte{0x00, 0x20, 0x00, 0x10}
	body = binary.AppendUvarint(body, uint64(logIndex))
	body = append(body, 0x20, 0x00, 0x10)
	body = binary.AppendUvarint(body, uint64(deleteIndex))
	body = append(body, 0x0b)

	var out []byte
	out = append(out, module[:8]...)
	for _, s := range sections {
		contents := module[s.start:s.end]
		switch s.id {
		case 3:
			contents = withEntry(contents, binary.AppendUvarint(nil, logType))
		case 10:
			contents = withEntry(contents, append(binary.AppendUvarint(nil, uint64(len(body))), body...))
		case 7:
			// The export's index, rewritten in place (its LEB128 may grow).
			old := reader{b: contents, at: logAt}
			old.uint()
			rewritten := append([]byte(nil), contents[:logAt]...)
			rewritten = binary.AppendUvarint(rewritten, uint64(added))
			contents = append(rewritten, contents[old.at:]...)
		}
		out = append(out, s.id)
		out = binary.AppendUvarint(out, uint64(len(contents)))
		out = append(out, contents...)
	}
	return out, nil
}

// withEntry appends an entry to a section that is a vector: its count goes
// up by one.
func withEntry(vector, entry []byte) []byte {
	r := reader{b: vector}
	count := r.uint()
	out := binary.AppendUvarint(nil, count+1)
	out = append(out, vector[r.at:]...)
	return append(out, entry...)
}

// reader reads the LEB128 numbers, names and limits of a WASM section.
type reader struct {
	b   []byte
	at  int
	err error
}

func (r *reader) uint() uint64 {
	if r.err != nil || r.at >= len(r.b) {
		r.fail()
		return 0
	}
	v, n := binary.Uvarint(r.b[r.at:])
	if n <= 0 {
		r.fail()
		return 0
	}
	r.at += n
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || r.at >= len(r.b) {
		r.fail()
		return 0
	}
	r.at++
	return r.b[r.at-1]
}

func (r *reader) name() string {
	n := int(r.uint())
	if r.err != nil || r.at+n > len(r.b) {
		r.fail()
		return ""
	}
	r.at += n
	return string(r.b[r.at-n : r.at])
}

func (r *reader) limits() {
	if r.byte()&1 == 1 { // a maximum follows the minimum
		r.uint()
	}
	r.uint()
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errors.New("truncated section")
	}
}
