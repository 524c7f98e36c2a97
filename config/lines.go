package config

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// lineIndex maps field paths ("authorities[1].origins[0]") to the YAML line
// where they appear. The root path "" maps to the first line of the document.
type lineIndex map[string]int

// indexLines records the line of every mapping key and sequence item under
// n, and counts the nodes of the document (aliases not followed).
func indexLines(n *yaml.Node) (idx lineIndex, nodes int) {
	idx = lineIndex{}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		if n == nil || depth > maxDepth {
			return
		}
		nodes++
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth+1)
			}
		case yaml.AliasNode:
			// Not followed: paths inside an alias report the alias's line,
			// and following aliases can expand exponentially.
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if isMerge(k) {
					continue
				}
				p := joinKey(path, k.Value)
				if _, seen := idx[p]; !seen {
					idx[p] = k.Line
				}
				walk(v, p, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				p := joinIndex(path, i)
				idx[p] = c.Line
				walk(c, p, depth+1)
			}
		}
	}
	if n != nil {
		idx[""] = n.Line
		if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			idx[""] = n.Content[0].Line
		}
	}
	walk(n, "", 0)
	return idx, nodes
}

// line returns the line of path, or of its nearest enclosing path present in
// the YAML (a missing field is reported where its parent is); 0 when the
// index is empty (a config built in code).
func (idx lineIndex) line(path string) int {
	if len(idx) == 0 {
		return 0
	}
	for {
		if l, ok := idx[path]; ok {
			return l
		}
		if path == "" {
			return 0
		}
		path = parentPath(path)
	}
}

// parentPath drops the last ".key" or "[i]" of path.
func parentPath(path string) string {
	i := strings.LastIndexAny(path, ".[")
	if i < 0 {
		return ""
	}
	return path[:i]
}

func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func joinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

func isMerge(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.Tag == "!!merge"
}
