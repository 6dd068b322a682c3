package config

import (
	"encoding/base64"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Store configures where state that outlives a request lives.
type Store struct {
	// URL is memory:, sqlite:PATH or postgres://… (resolved: it may come
	// from a secret reference, so it is a Secret).
	URL Secret
	// URLLine is the line of `url` in the file; 0 when defaulted.
	URLLine int
	// Given reports whether the file had a `store` section; without one the
	// store is memory: and serve warns that state is not durable.
	Given bool
}

// Vault holds the keys that seal stored secrets. No keys: the vault is not
// configured, and writing a secret is refused naming vault.keys.
type Vault struct {
	Keys   []VaultKey
	Active string
}

// VaultKey is one AES-256 key: Key is its 32 raw bytes.
type VaultKey struct {
	ID  string
	Key Secret
}

// VaultKeyBytes is the size of a decoded vault key.
const VaultKeyBytes = 32

// Store defaults (docs/DECISIONS.md, "New configuration keys").
const (
	DefaultStoreURL = "memory:"
)

var storeSchemes = []string{"memory:", "sqlite:", "postgres://", "postgresql://"}

// store decodes `store: {url}`. The URL may be a secret reference
// (a PostgreSQL password); an unknown scheme refuses to boot.
func (d *decoder) store(fs *storeShape, n *yaml.Node, c *Config) {
	c.Store.Given = true
	e := fs.URL
	value, ok := d.requiredSecret(n, e, " (memory:, sqlite:PATH or postgres://…)")
	if !ok {
		return
	}
	known := false
	for _, s := range storeSchemes {
		known = known || strings.HasPrefix(value, s)
	}
	switch {
	case !known || (strings.HasPrefix(value, "memory:") && value != "memory:"):
		d.fail(e.val, e.path, "unknown scheme: use memory:, sqlite:PATH or postgres://…")
		return
	case value == "sqlite:":
		d.fail(e.val, e.path, "sqlite: needs a file path (sqlite:/var/lib/connecta/state.db)")
		return
	case strings.HasPrefix(value, "sqlite:"):
		// A relative path is anchored at the config file's directory, like
		// every other path in the file.
		p := strings.TrimPrefix(value, "sqlite:")
		if !strings.HasPrefix(p, "/") {
			value = "sqlite:" + d.anchor(p)
		}
	}
	c.Store.URL = NewSecret(value)
	c.Store.URLLine = e.val.Line
}

// anchor resolves a relative path against the config file's directory.
func (d *decoder) anchor(p string) string {
	if d.baseDir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(d.baseDir, p)
}

// vault decodes `vault: {keys: [{id, key}], active}`. Keys are 32 bytes in
// standard base64, normally a secret reference.
func (d *decoder) vault(fs *vaultShape, n *yaml.Node, c *Config) {
	ke := fs.Keys
	if !ke.given() || ke.val.Kind != yaml.SequenceNode || len(ke.val.Content) == 0 {
		d.fail(n, ke.path, "is required: a non-empty list of {id, key} (32 bytes, base64)")
		return
	}
	ids := map[string]bool{}
	each(d, ke, func(_ int, item *yaml.Node, kf *vaultKeyShape) {
		var k VaultKey
		ie := kf.ID
		s, ok := d.required(item, ie, "")
		if !ok {
			return
		}
		switch {
		case s == "" || len(s) > 64 || hasControl(s):
			d.fail(ie.val, ie.path, "must be 1-64 bytes without control characters")
			return
		case ids[s]:
			d.fail(ie.val, ie.path, "%q appears twice", clip(s))
			return
		}
		ids[s] = true
		k.ID = s
		ve := kf.Key
		value, ok := d.requiredSecret(item, ve, "")
		if !ok {
			return
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		if err != nil || len(raw) != VaultKeyBytes {
			d.fail(ve.val, ve.path, "must be %d bytes in standard base64 (openssl rand -base64 32)", VaultKeyBytes)
			return
		}
		k.Key = NewSecret(string(raw))
		c.Vault.Keys = append(c.Vault.Keys, k)
	})
	ae := fs.Active
	if s, ok := d.required(n, ae, ": the id of the key new values are sealed under"); ok {
		if !ids[s] {
			d.fail(ae.val, ae.path, "%q is not the id of any vault.keys entry", clip(s))
			return
		}
		c.Vault.Active = s
	}
}

// secretValue decodes a string that may contain secret references and
// resolves them; an unresolvable reference refuses to boot.
func (d *decoder) secretValue(n *yaml.Node, field string) (string, bool) {
	value, _, ok := d.secret(n, field, "")
	return value, ok
}

// secret is secretValue that also returns the text as written; with
// literals named ("tokens"), a value that holds no reference is refused.
func (d *decoder) secret(n *yaml.Node, field string, literals string) (value, raw string, ok bool) {
	raw, ok = d.str(n, field)
	if !ok {
		return "", "", false
	}
	segs, err := parseTemplate(raw)
	if err != nil {
		d.fail(n, field, "%s", err)
		return "", "", false
	}
	if literals != "" && !hasReference(segs) {
		d.fail(n, field, "must be a secret reference (${env:NAME}, ${file:PATH} or ${credential:NAME}); literal %s are refused", literals)
		return "", "", false
	}
	value, missing := d.r.resolve(segs, d.baseDir)
	if missing != nil {
		for _, m := range missing {
			d.fail(n, field, "cannot resolve %s: %s", m.raw, m.reason)
		}
		return "", "", false
	}
	return value, raw, true
}

// required decodes a string field that must be given: a missing one fails
// at the parent node, "is required" followed by hint (" (…)", ": …" or "").
func (d *decoder) required(parent *yaml.Node, e field, hint string) (string, bool) {
	if !e.given() {
		d.fail(parent, e.path, "is required%s", hint)
		return "", false
	}
	return d.str(e.val, e.path)
}

// requiredSecret is required for a secretValue.
func (d *decoder) requiredSecret(parent *yaml.Node, e field, hint string) (string, bool) {
	if !e.given() {
		d.fail(parent, e.path, "is required%s", hint)
		return "", false
	}
	return d.secretValue(e.val, e.path)
}
