package configfile

import (
	"github.com/goccy/go-yaml/ast"
)

// maxValues bounds the values a YAML document stands for once its aliases
// are expanded: goccy/go-yaml expands them without a bound, so that a few
// lines of aliases of aliases (a "billion laughs") would take the tool's
// time and memory. A configuration is hundreds of values.
const maxValues = 1 << 20

// expandedSize counts the values node stands for, each alias counted as
// what its anchor stands for, up to maxValues+1. anchors holds the anchors
// seen so far in document order, by name.
func expandedSize(n ast.Node, anchors map[string]int) int {
	switch m := n.(type) {
	case nil:
		return 0
	case *ast.MappingNode:
		size := 1
		for _, v := range m.Values {
			size = min(size+expandedSize(v, anchors), maxValues+1)
		}
		return size
	case *ast.MappingValueNode:
		return min(expandedSize(m.Key, anchors)+expandedSize(m.Value, anchors), maxValues+1)
	case *ast.MappingKeyNode:
		return expandedSize(m.Value, anchors)
	case *ast.SequenceNode:
		size := 1
		for _, v := range m.Values {
			size = min(size+expandedSize(v, anchors), maxValues+1)
		}
		return size
	case *ast.AnchorNode:
		size := expandedSize(m.Value, anchors)
		if m.Name != nil {
			anchors[m.Name.GetToken().Value] = size
		}
		return size
	case *ast.AliasNode:
		if m.Value != nil {
			if size, ok := anchors[m.Value.GetToken().Value]; ok {
				return size
			}
		}
		return 1 // an unknown anchor: the decoder says so
	case *ast.TagNode:
		return expandedSize(m.Value, anchors)
	}
	return 1
}

// maxNesting bounds how deep a file nests flow lists and mappings ([ and
// {): goccy/go-yaml takes time and memory quadratic in the depth (20,000
// levels: a second and 650 MB). A configuration nests a few levels.
const maxNesting = 1000

// tooDeep is the offset where data opens its (maxNesting+1)th level of
// brackets, counting every [ and { (in strings and comments too: an upper
// bound), or -1.
func tooDeep(data []byte) int {
	depth := 0
	for i, c := range data {
		switch c {
		case '[', '{':
			if depth++; depth > maxNesting {
				return i
			}
		case ']', '}':
			depth = max(0, depth-1)
		}
	}
	return -1
}
