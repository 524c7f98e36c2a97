package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"

	"go.yaml.in/yaml/v3"

	"github.com/xds-relay/xds-relay/internal/trustfile"
)

// MaxFileBytes bounds a config file: a larger one is refused by its size,
// unread. A Kubernetes ConfigMap holds at most 1 MiB; config/example.yaml,
// every key with comments, is 18 KB. Parsing costs up to about 150 times
// the file's size in memory (a list of one-letter items: 1 MiB takes
// 0.6 s and 156 MiB at peak; 4 MiB would take 4 s and 540 MiB), so the
// bound is what a reload may cost a running relay.
const MaxFileBytes = 1 * MiB

// Load reads the file at path and parses it (see Parse). The file is read
// as internal/trustfile reads it (OperatorWritten): opened without blocking,
// a regular file owned by the relay's user or root that nobody but its
// owner and group may write, at most MaxFileBytes; anything else is
// refused (trustfile.Refused) before it is parsed.
func Load(path string) (*Config, error) {
	data, err := trustfile.Read(path, int64(MaxFileBytes), trustfile.OperatorWritten)
	if err != nil {
		if trustfile.Refused(err) {
			return nil, fmt.Errorf("config: %s: %w", path, err)
		}
		return nil, fmt.Errorf("config: read: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes data strictly (unknown keys are errors), applies defaults
// and validates the result. source names data in errors (a file name). On
// error the returned error lists every problem, one per line; Problems
// extracts them.
func Parse(data []byte, source string) (*Config, error) {
	c, err := decode(data, source)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode is Parse without validation: strict decoding over Default(), then
// per-entry defaults. Decoding problems (unknown keys, wrong types) are
// returned together with any validation problems, so that one run reports
// everything.
func decode(data []byte, source string) (*Config, error) {
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, syntaxError(data, source, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &FieldError{Source: sourceName(source), Line: extra.Line, Problem: "a second YAML document starts here: a config file holds one"}
	}

	c := Default()
	c.source = source
	var nodes int
	c.lines, nodes = indexLines(&root)
	if root.Kind == 0 {
		// Empty file: defaults only; Validate reports what is missing.
		c.lines = lineIndex{"": 1}
		return c, nil
	}
	d := newStrictDecoder(nodes)
	d.decode(&root, reflect.ValueOf(c).Elem(), "", 0)
	c.ApplyAuthorityDefaults()
	if len(d.problems) > 0 {
		// Validation's problems too, so that one run reports everything;
		// but not those a decoding problem causes (a list written as a
		// string is not also "at least one origin is required"): a cause
		// is listed, never its consequence before it.
		problems := d.problems
		if verr := c.Validate(); verr != nil {
			for _, p := range Problems(verr) {
				if !d.derived(p.Path) {
					problems = append(problems, p)
				}
			}
		}
		return nil, c.join(problems)
	}
	return c, nil
}

// join stamps problems with the source and orders them by line. Past
// maxProblems, the rest are only counted.
func (c *Config) join(problems []*FieldError) error {
	if len(problems) == 0 {
		return nil
	}
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	shown := min(len(problems), maxProblems)
	errs := make([]error, 0, shown+1)
	for _, p := range problems[:shown] {
		p.Source = c.source
		errs = append(errs, p)
	}
	if more := len(problems) - shown; more > 0 {
		errs = append(errs, fmt.Errorf("%s: %d more problems not shown: %w", sourceName(c.source), more, ErrInvalid))
	}
	return errors.Join(errs...)
}

func sourceName(source string) string {
	if source == "" {
		return "config"
	}
	return source
}
