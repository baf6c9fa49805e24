package configfile

// The place in a file of a field the plugin names by its path
// (config.FieldError.Path: rule_items[0].limit_keys[1].token_per_minute,
// model_weights."gpt-4.1"), found in the YAML tree goccy/go-yaml keeps.

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/token"
)

// step is one step of a path: a mapping's key, or a list's index.
type step struct {
	key     string
	index   int
	isIndex bool
}

// parsePath reads a path as package config writes it: keys joined by
// ".", unquoted when they are plain names and Go-quoted otherwise, and
// indexes in brackets. It stops where it cannot read on (a key config
// shortened with "..."), returning the steps before.
func parsePath(p string) []step {
	var steps []step
	for p != "" {
		switch {
		case p[0] == '[':
			end := strings.IndexByte(p, ']')
			i, err := strconv.Atoi(p[1:max(end, 1)])
			if end < 0 || err != nil || i < 0 {
				return steps
			}
			steps, p = append(steps, step{index: i, isIndex: true}), p[end+1:]
		case p[0] == '"':
			q, err := strconv.QuotedPrefix(p)
			if err != nil {
				return steps
			}
			key, _ := strconv.Unquote(q)
			steps, p = append(steps, step{key: key}), p[len(q):]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			if end == 0 {
				return steps
			}
			steps, p = append(steps, step{key: p[:end]}), p[end:]
		}
		if strings.HasPrefix(p, ".") {
			p = p[1:]
			if p == "" || p[0] == '.' || p[0] == '[' {
				return steps
			}
		} else if p != "" && p[0] != '[' {
			return steps
		}
	}
	return steps
}

// pathString writes a path as package config does.
func pathString(path []step) string {
	var b strings.Builder
	for i, s := range path {
		switch {
		case s.isIndex:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		default:
			if i > 0 {
				b.WriteByte('.')
			}
			if plainKey(s.key) {
				b.WriteString(s.key)
			} else {
				b.WriteString(strconv.Quote(s.key))
			}
		}
	}
	return b.String()
}

// plainKey reports whether a key is written unquoted in a path: ASCII
// letters, digits, '_' and '-'.
func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// find is the place of path in document doc, or of the deepest part of it
// the document has. doc -1 is a JSON file's one document: its tree is read
// now (JSON is YAML), only for this.
func (f *file) find(doc int, path []step) (p place) {
	if doc < 0 {
		defer func() {
			if recover() != nil {
				p = place{} // no place rather than no message
			}
		}()
		if f.docs == nil && f.parse() != nil || len(f.docs) != 1 {
			return place{}
		}
		doc = 0
	}
	return f.docPlace(doc, path)
}

// docPlace is the place of path in document doc, or of the deepest part
// of it the document has: a key's place for a key, an element's first
// token for an index. nil is the document's start.
func (f *file) docPlace(doc int, path []step) place {
	if doc < 0 || doc >= len(f.docs) {
		return place{}
	}
	d := f.docs[doc]
	n, tk := d.body, firstToken(d.body)
	for _, s := range path {
		next, at := child(n, s)
		if at == nil {
			break
		}
		n, tk = next, at
	}
	if tk == nil || tk.Position == nil {
		return place{}
	}
	return place{tk.Position.Line + d.firstLine - 1, tk.Position.Column}
}

// child is the node at step s of n, and the token to point at for it (nil
// when n has no such child).
func child(n ast.Node, s step) (ast.Node, *token.Token) {
	n = unwrap(n)
	if s.isIndex {
		seq, ok := n.(*ast.SequenceNode)
		if !ok || s.index >= len(seq.Values) {
			return nil, nil
		}
		v := seq.Values[s.index]
		return v, firstToken(v)
	}
	var values []*ast.MappingValueNode
	switch m := n.(type) {
	case *ast.MappingNode:
		values = m.Values
	case *ast.MappingValueNode:
		values = []*ast.MappingValueNode{m}
	}
	var found *ast.MappingValueNode
	for _, mv := range values {
		if mv != nil && mv.Key != nil && keyOf(mv.Key) == s.key {
			found = mv // the last: the one a duplicate key names
		}
	}
	if found == nil {
		return nil, nil
	}
	return found.Value, found.Key.GetToken()
}

// unwrap is the node an anchor or a tag is on.
func unwrap(n ast.Node) ast.Node {
	for {
		switch m := n.(type) {
		case *ast.AnchorNode:
			n = m.Value
		case *ast.TagNode:
			n = m.Value
		default:
			return n
		}
	}
}

// keyOf is a mapping key as the configuration's JSON writes it.
func keyOf(k ast.MapKeyNode) string {
	var n ast.Node = k
	if mk, ok := n.(*ast.MappingKeyNode); ok {
		n = mk.Value
	}
	if s, ok := unwrap(n).(ast.ScalarNode); ok {
		return keyText(s.GetValue())
	}
	return fmt.Sprint(n)
}

// keyText is a decoded mapping key as a JSON member name.
func keyText(k any) string {
	switch k := k.(type) {
	case string:
		return k
	case nil:
		return "null"
	}
	return fmt.Sprint(k)
}

// firstToken is where a node starts: a block mapping's first key (goccy
// gives a mapping the token of its first ':').
func firstToken(n ast.Node) *token.Token {
	switch m := n.(type) {
	case nil:
		return nil
	case *ast.MappingNode:
		if !m.IsFlowStyle && len(m.Values) > 0 {
			return firstToken(m.Values[0])
		}
	case *ast.MappingValueNode:
		if m.Key != nil {
			return m.Key.GetToken()
		}
	}
	return n.GetToken()
}
