// Package xdstest is test support only: raw xDS client streams with a
// receive pump, shared by the tests of internal/downstream and integration.
// Nothing but tests imports it.
package xdstest
