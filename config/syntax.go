package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// YAML syntax errors. The YAML library reports the line where the block
// around a mistake began ("line 1" for a badly indented line 4 of a list
// that starts on line 2), not the line of the mistake. The line of the
// mistake is the first whose prefix of the document no longer parses with
// the same complaint: a document cut before the mistake still parses (or,
// cut inside a flow list or a quoted string, fails with another
// complaint), and one cut after it fails as the whole does. So a binary
// search over the prefixes finds it in about log2(lines) parses.

// yamlErrLine splits the library's "yaml: line N: complaint".
var yamlErrLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// indentationComplaints are the library's words for what is most often a
// line indented too far or not far enough.
var indentationComplaints = []string{
	"did not find expected key",
	"did not find expected '-' indicator",
	"mapping values are not allowed in this context",
	"block sequence entries are not allowed in this context",
	"found a tab character that violates indentation",
}

// syntaxError is a YAML syntax error as the relay reports it, a
// FieldError of no field: "source: line 4: did not find expected '-'
// indicator (YAML syntax: ...)".
func syntaxError(data []byte, source string, err error) error {
	m := yamlErrLine.FindStringSubmatch(err.Error())
	if m == nil {
		return fmt.Errorf("%s: %w", sourceName(source), err)
	}
	reported, _ := strconv.Atoi(m[1])
	complaint := m[2]
	hint := "YAML syntax"
	for _, c := range indentationComplaints {
		if complaint == c {
			hint = "YAML syntax: check this line's indentation against the lines above it"
		}
	}
	return &FieldError{Source: sourceName(source), Line: mistakeLine(data, reported, complaint), Problem: complaint + " (" + hint + ")"}
}

// mistakeLine is the first line, from the reported one on, on whose
// prefix of data the parser makes the same complaint; the reported line
// when the whole document does not.
func mistakeLine(data []byte, reported int, complaint string) int {
	lines := bytes.SplitAfter(data, []byte("\n"))
	complains := func(n int) bool {
		err := parseYAML(bytes.Join(lines[:n], nil))
		if err == nil {
			return false
		}
		m := yamlErrLine.FindStringSubmatch(err.Error())
		return m != nil && m[2] == complaint
	}
	lo, hi := max(reported-1, 1), len(lines)
	if lo > hi || !complains(hi) {
		return reported
	}
	for lo < hi { // complains(hi) holds
		mid := lo + (hi-lo)/2
		if complains(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// parseYAML parses data as one YAML document.
func parseYAML(data []byte) error {
	var n yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&n); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}
