package contract

import (
	"bytes"
	"io"
	"net/http"
)

func ioReadAll(r *http.Request) ([]byte, error) { return io.ReadAll(r.Body) }
func ioNopCloser(b []byte) io.ReadCloser        { return io.NopCloser(bytes.NewReader(b)) }
