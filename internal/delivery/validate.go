package delivery

import (
	"errors"
	"fmt"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/xds-relay/xds-relay/internal/cache"
	"github.com/xds-relay/xds-relay/internal/xdstype"
)

// Bounds on what validation remembers.
const (
	// maxRefused bounds the invalid versions remembered by key: past it,
	// one is forgotten (its resend is validated, logged and counted again).
	maxRefused = 4096
	// maxRecent bounds the latest invalid versions the page lists.
	maxRecent = 20
	// maxErrorText bounds the validation error kept and logged per
	// version (a message with many invalid fields can be long).
	maxErrorText = 1024
	// maxRememberedName: a refusal is remembered only for a name of at
	// most this many bytes (the default max_name_length), so the memory
	// of refusals stays bounded whatever names an origin sends; a longer
	// name's resend is validated again.
	maxRememberedName = 2048
	// maxShownName bounds a name as the page lists it and the log writes
	// it.
	maxShownName = 256
)

// validator is what a resource type's generated code provides
// (protoc-gen-validate): every rule checked, every violation reported.
type validator interface{ ValidateAll() error }

// refusal is an invalid version of a key, remembered.
type refusal struct {
	version string
	err     error
}

// Invalid is one invalid version as the page lists it.
type Invalid struct {
	Time      string `json:"time"`
	Authority string `json:"authority"`
	Group     string `json:"group,omitempty"`
	Type      string `json:"type"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Error     string `json:"error"`
}

// Validate is cache.Validator: it checks a new version of k (one whose
// content differs from the cached one) once, unless delivery.validate is
// off for k's authority. An invalid version is counted, logged once and
// remembered, so that its resend is refused again without validating;
// the returned error is ValidateAll's, which names the field.
func (d *Delivery) Validate(k cache.Key, r *cache.Resource) error {
	if !d.settings.Load().of(k.Link.Authority).Validate {
		return nil
	}
	d.mu.Lock()
	prev, seen := d.refused[k]
	d.mu.Unlock()
	if seen && prev.version == r.Version {
		return prev.err
	}
	err := Check(r.Body)
	d.noteChecked(k, r, err)
	return err
}

// Check validates body against its type's rules: nil when it passes, or
// when its type is not one the process can decode (not registered with
// protoregistry: an operator's own type the relay does not know) or has
// no rules (no ValidateAll).
func Check(body *anypb.Any) error {
	mt, err := protoregistry.GlobalTypes.FindMessageByURL(body.GetTypeUrl())
	if err != nil {
		return nil
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(body.GetValue(), msg); err != nil {
		return fmt.Errorf("cannot be decoded as %s: %w", mt.Descriptor().FullName(), err)
	}
	v, ok := msg.(validator)
	if !ok {
		return nil
	}
	if err := v.ValidateAll(); err != nil {
		return errors.New(truncate(err.Error(), maxErrorText))
	}
	return nil
}

// noteChecked records the outcome of validating r, k's new version: a
// valid one forgets k's refusal; an invalid one is remembered, listed,
// counted and logged.
func (d *Delivery) noteChecked(k cache.Key, r *cache.Resource, err error) {
	d.mu.Lock()
	if err == nil {
		delete(d.refused, k)
		d.mu.Unlock()
		return
	}
	d.remember(k, refusal{version: r.Version, err: err})
	d.invalidTotal++
	name := truncate(r.Name, maxShownName)
	inv := Invalid{Time: d.now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), Authority: k.Link.Authority, Group: k.Link.Group,
		Type: k.TypeURL, Name: name, Version: r.Version, Error: err.Error()}
	if len(d.recent) == maxRecent {
		d.recent = append(d.recent[:0], d.recent[1:]...)
	}
	d.recent = append(d.recent, inv)
	d.mu.Unlock()
	d.m.invalid.WithLabelValues(k.Link.Authority, xdstype.Label(k.TypeURL)).Inc()
	d.lg.Warn("origin version refused: invalid (not cached, not sent; the origin is NACKed)",
		zap.String("authority", k.Link.Authority), zap.String("group", k.Link.Group), zap.String("type_url", k.TypeURL),
		zap.String("name", name), zap.String("version", r.Version), zap.String("origin_version", truncate(r.OriginVersion, maxShownName)), zap.Error(err))
}

// remember keeps k's refusal, within maxRefused keys (past it, any one is
// forgotten) and for names of at most maxRememberedName bytes. Called
// with mu locked.
func (d *Delivery) remember(k cache.Key, ref refusal) {
	if len(k.Name) > maxRememberedName {
		return
	}
	if _, ok := d.refused[k]; !ok && len(d.refused) >= maxRefused {
		for old := range d.refused { // any one: its resend is validated again
			delete(d.refused, old)
			break
		}
	}
	d.refused[k] = ref
}

// truncate cuts s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
