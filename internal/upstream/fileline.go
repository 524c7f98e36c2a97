package upstream

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// A file source's file is YAML (or JSON) turned into JSON for protojson,
// whose errors give a position in that JSON ("(line 1:245)"), which means
// nothing to whoever wrote the file. yamlLineError rewrites such an error
// with the line of the file it comes from: the JSON position is turned
// into a path of keys and indexes, and the path is looked up in the YAML.

// protojsonPos matches the position protojson puts in its errors, with
// the spaces around it (protobuf varies them on purpose, a space or a
// no-break space, so that nobody matches its messages exactly).
var protojsonPos = regexp.MustCompile(`[\s\x{00a0}]*\(line (\d+):(\d+)\):?[\s\x{00a0}]*`)

// yamlLineError returns err with its JSON position replaced by "line N: "
// of raw, the file js was converted from; err itself when it has no
// position or the position cannot be placed.
func yamlLineError(err error, raw, js []byte) error {
	m := protojsonPos.FindStringSubmatchIndex(err.Error())
	if m == nil {
		return err
	}
	msg := err.Error()
	line, _ := strconv.Atoi(msg[m[2]:m[3]])
	col, _ := strconv.Atoi(msg[m[4]:m[5]])
	off := jsonOffset(js, line, col)
	if off < 0 {
		return err
	}
	path := jsonPathAt(js, off)
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil {
		return err
	}
	n := yamlLine(&doc, path)
	if n == 0 {
		return err
	}
	return fmt.Errorf("line %d: %s", n, msg[:m[0]]+" "+msg[m[1]:])
}

// jsonOffset is the byte offset of line:col (col counts runes from 1).
func jsonOffset(js []byte, line, col int) int {
	start := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(js[start:], '\n')
		if i < 0 {
			return -1
		}
		start += i + 1
	}
	off := start
	for c := 1; c < col && off < len(js); c++ {
		_, size := utf8.DecodeRune(js[off:])
		off += size
	}
	return off
}

// jsonPathAt returns the path (object keys as strings, array indexes as
// ints) of the deepest value or key that starts at or before off.
func jsonPathAt(js []byte, off int) []any {
	type frame struct {
		obj    bool
		key    any  // the current key (string) or index (int)
		wanted bool // obj: the next token is a key
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	var stack []frame
	var found []any
	path := func() []any {
		out := make([]any, 0, len(stack))
		for _, f := range stack {
			if f.key != nil {
				out = append(out, f.key)
			}
		}
		return out
	}
	for {
		before := int(dec.InputOffset())
		if before > off {
			return found
		}
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return found
		}
		top := len(stack) - 1
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:top]
			continue
		}
		if top >= 0 {
			f := &stack[top]
			switch {
			case f.obj && f.wanted:
				f.key, f.wanted = tok.(string), false
				found = path()
				continue
			case f.obj:
				f.wanted = true
			default:
				if f.key == nil {
					f.key = 0
				} else {
					f.key = f.key.(int) + 1
				}
			}
		}
		found = path()
		if d, ok := tok.(json.Delim); ok {
			stack = append(stack, frame{obj: d == '{', wanted: d == '{'})
		}
	}
}

// yamlLine is the line of the deepest node of doc on path (0: none).
func yamlLine(doc *yaml.Node, path []any) int {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch k := p.(type) {
		case string:
			if n.Kind != yaml.MappingNode {
				return line
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == k {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		case int:
			if n.Kind == yaml.SequenceNode && k < len(n.Content) {
				next = n.Content[k]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}
