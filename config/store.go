package config

import (
	"encoding/base64"
	"fmt"
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
func (d *decoder) store(n *yaml.Node, c *Config) {
	fs, ok := d.fields(n, "store", "url")
	if !ok {
		return
	}
	c.Store.Given = true
	e, ok := fs["url"]
	if !ok {
		d.fail(n, "store.url", "is required (memory:, sqlite:PATH or postgres://…)")
		return
	}
	value, ok := d.secretValue(e.val, "store.url")
	if !ok {
		return
	}
	known := false
	for _, s := range storeSchemes {
		known = known || strings.HasPrefix(value, s)
	}
	switch {
	case !known || (strings.HasPrefix(value, "memory:") && value != "memory:"):
		d.fail(e.val, "store.url", "unknown scheme: use memory:, sqlite:PATH or postgres://…")
		return
	case value == "sqlite:":
		d.fail(e.val, "store.url", "sqlite: needs a file path (sqlite:/var/lib/connecta/state.db)")
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
func (d *decoder) vault(n *yaml.Node, c *Config) {
	fs, ok := d.fields(n, "vault", "keys", "active")
	if !ok {
		return
	}
	ke, ok := fs["keys"]
	if !ok || ke.val.Kind != yaml.SequenceNode || len(ke.val.Content) == 0 {
		d.fail(n, "vault.keys", "is required: a non-empty list of {id, key} (32 bytes, base64)")
		return
	}
	ids := map[string]bool{}
	for i, item := range ke.val.Content {
		path := fmt.Sprintf("vault.keys[%d]", i)
		kf, ok := d.fields(item, path, "id", "key")
		if !ok {
			continue
		}
		var k VaultKey
		if ie, ok := kf["id"]; !ok {
			d.fail(item, path+".id", "is required")
			continue
		} else if s, ok := d.str(ie.val, path+".id"); ok {
			switch {
			case s == "" || len(s) > 64 || hasControl(s):
				d.fail(ie.val, path+".id", "must be 1-64 bytes without control characters")
				continue
			case ids[s]:
				d.fail(ie.val, path+".id", "%q appears twice", clip(s))
				continue
			}
			ids[s] = true
			k.ID = s
		} else {
			continue
		}
		ve, ok := kf["key"]
		if !ok {
			d.fail(item, path+".key", "is required")
			continue
		}
		value, ok := d.secretValue(ve.val, path+".key")
		if !ok {
			continue
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		if err != nil || len(raw) != VaultKeyBytes {
			d.fail(ve.val, path+".key", "must be %d bytes in standard base64 (openssl rand -base64 32)", VaultKeyBytes)
			continue
		}
		k.Key = NewSecret(string(raw))
		c.Vault.Keys = append(c.Vault.Keys, k)
	}
	ae, ok := fs["active"]
	if !ok {
		d.fail(n, "vault.active", "is required: the id of the key new values are sealed under")
		return
	}
	if s, ok := d.str(ae.val, "vault.active"); ok {
		if !ids[s] {
			d.fail(ae.val, "vault.active", "%q is not the id of any vault.keys entry", clip(s))
			return
		}
		c.Vault.Active = s
	}
}

// secretValue decodes a string that may contain secret references and
// resolves them; an unresolvable reference refuses to boot.
func (d *decoder) secretValue(n *yaml.Node, field string) (string, bool) {
	raw, ok := d.str(n, field)
	if !ok {
		return "", false
	}
	segs, err := parseTemplate(raw)
	if err != nil {
		d.fail(n, field, "%s", err)
		return "", false
	}
	value, missing := d.r.resolve(segs, d.baseDir)
	if missing != nil {
		for _, m := range missing {
			d.fail(n, field, "cannot resolve %s: %s", m.raw, m.reason)
		}
		return "", false
	}
	return value, true
}
