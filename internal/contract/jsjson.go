package contract

import (
	"encoding/json"

	"github.com/connecta-dev/connecta/internal/jstext"
)

// JSON the model reads is written by jstext, the one writer (see
// docs/DECISIONS.md "JSON the model reads").

// objectJSON writes o. It cannot fail: contract objects hold only strings,
// integers, booleans and raw JSON.
func objectJSON(o jstext.Object) []byte {
	b, err := o.MarshalJSON()
	if err != nil {
		panic("contract: " + err.Error())
	}
	return b
}

// raw wraps already-serialized JSON as an Object value.
func raw(b []byte) json.RawMessage { return json.RawMessage(b) }
