package config

import (
	"reflect"
	"testing"
)

// Every shape reachable from the file's is walkable: each field is a
// field, section or list with a yaml tag naming a key once, so no
// configuration reaches a shape the walker cannot bind.
func TestShapes_EveryFieldIsAKeyOnce(t *testing.T) {
	binderType := reflect.TypeFor[binder]()
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(st reflect.Type) {
		if seen[st] {
			return
		}
		seen[st] = true
		keys := map[string]bool{}
		for i := range st.NumField() {
			f := st.Field(i)
			key := f.Tag.Get("yaml")
			switch {
			case key == "":
				t.Errorf("%s.%s has no yaml tag", st.Name(), f.Name)
			case keys[key]:
				t.Errorf("%s: key %q twice", st.Name(), key)
			case !f.IsExported():
				t.Errorf("%s.%s is not exported: the walker cannot bind it", st.Name(), f.Name)
			case !reflect.PointerTo(f.Type).Implements(binderType):
				t.Errorf("%s.%s is a %s, not a field, section or list", st.Name(), f.Name, f.Type)
			}
			keys[key] = true
			switch v := reflect.New(f.Type).Elem().Interface().(type) {
			case interface{ shape() reflect.Type }:
				walk(v.shape())
			case interface{ items() reflect.Type }:
				walk(v.items())
			}
		}
	}
	walk(reflect.TypeFor[fileShape]())
	for _, deep := range []reflect.Type{reflect.TypeFor[callBudgetShape](), reflect.TypeFor[claimRuleShape](), reflect.TypeFor[vaultKeyShape]()} {
		if !seen[deep] {
			t.Errorf("the walk does not reach %s", deep.Name())
		}
	}
}
