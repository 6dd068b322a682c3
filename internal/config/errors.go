package config

import (
	"sort"
	"strconv"
	"strings"
)

// Error is one refusal: the configuration cannot be used. Error() reads
// `connecta.yaml:12: connectors[1].id: "Bad Id" must match …`.
type Error struct {
	File    string
	Line    int // 1-based; 0 when the problem has no position (e.g. a missing file)
	Column  int // 1-based; 0 when unknown
	Field   string
	Message string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if e.File != "" {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(e.Line))
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// ErrorList is returned when a file has several problems (at most
// MaxErrors, in file order). errors.As finds the first *Error in it.
type ErrorList []*Error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Unwrap lets errors.As and errors.Is see every refusal.
func (l ErrorList) Unwrap() []error {
	out := make([]error, len(l))
	for i, e := range l {
		out[i] = e
	}
	return out
}

// Warning is a non-fatal finding; see Config.Warnings.
type Warning struct {
	File    string
	Line    int
	Field   string
	Message string
}

func (w Warning) String() string {
	e := Error{File: w.File, Line: w.Line, Field: w.Field, Message: w.Message}
	return e.Error()
}

// result turns the collected refusals into the error Load returns: nil, one
// *Error, or an ErrorList in file order.
func result(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool {
		if errs[i].Line != errs[j].Line {
			return errs[i].Line < errs[j].Line
		}
		return errs[i].Column < errs[j].Column
	})
	if len(errs) > MaxErrors {
		errs = errs[:MaxErrors]
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return ErrorList(errs)
}
