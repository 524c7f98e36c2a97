package config

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalid is wrapped by every FieldError: errors.Is(err, ErrInvalid)
	// tells a bad config from a file that could not be read.
	ErrInvalid = errors.New("invalid config")
	// ErrByteSize is wrapped by ByteSize parse errors.
	ErrByteSize = errors.New("invalid byte size")
	// ErrBadToken: a bearer token file does not hold a usable token
	// (ReadBearerToken). Such errors never contain the token.
	ErrBadToken = errors.New("bearer token file")
)

// FieldError is one problem in a config, at a field path such as
// "authorities[2].origins[0]".
type FieldError struct {
	// Source is the file (or other origin) of the config; "" when built in code.
	Source string
	// Path is the field path, YAML keys joined by '.', list indexes in
	// []; "" for a problem of the YAML syntax.
	Path string
	// Line is the 1-based YAML line of the field (or of its nearest
	// enclosing field when it is absent); 0 when unknown.
	Line int
	// Problem says what is wrong.
	Problem string
}

// Error formats "source: path (line N): problem"; a problem of no field
// (YAML syntax) is "source: line N: problem".
func (e *FieldError) Error() string {
	s := e.Path
	switch {
	case e.Path == "" && e.Line > 0:
		s = fmt.Sprintf("line %d", e.Line)
	case e.Line > 0:
		s = fmt.Sprintf("%s (line %d)", s, e.Line)
	}
	if s != "" {
		s += ": "
	}
	s += e.Problem
	if e.Source != "" {
		s = e.Source + ": " + s
	}
	return s
}

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Problems returns the FieldErrors inside err (as returned by Parse, Load
// or Validate), in order.
func Problems(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(e error) {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, c := range u.Unwrap() {
				walk(c)
			}
		case interface{ Unwrap() error }:
			if c := u.Unwrap(); c != nil {
				walk(c)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
