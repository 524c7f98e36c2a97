// Package xdsname parses, formats and compares xdstp:// resource names
// (xDS TP1): authorities, types, id paths, context parameters, processing
// directives, and glob collections. It is pure code and imports nothing of
// the project.
package xdsname
