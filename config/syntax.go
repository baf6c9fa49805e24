package config

// Where a configuration that is not JSON goes wrong: its line and column,
// in the words the plugin logs and the tools print (atrl, make run's local
// gateway, through internal/configfile). Only a refused document pays for
// it: the plugin checks JSON with gjson as before, and looks for the place
// only once gjson has said no.

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// SyntaxError is where a document stops being JSON, and why.
type SyntaxError struct {
	// Offset is the byte offset of the mistake in the document; Line and
	// Column are its line and column, from 1 (Column counts characters).
	// Line is 0 when the place is unknown.
	Offset, Line, Column int
	// What is the mistake, e.g. `a comma after the last member of an
	// object (JSON allows none)`.
	What string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "invalid JSON"
	}
	return "invalid JSON at line " + strconv.Itoa(e.Line) + ", column " + strconv.Itoa(e.Column) + ": " + e.What
}

// CheckJSON returns nil when doc is JSON as the plugin reads it (gjson),
// else where and why it is not.
func CheckJSON(doc []byte) *SyntaxError {
	if gjson.ValidBytes(doc) {
		return nil
	}
	return syntaxError(doc)
}

// invalidJSON is Parse's error for a document gjson refuses: a
// *FieldError of the whole document saying where and why.
func invalidJSON(doc []byte) error { return fieldErr("", syntaxError(doc).Error()) }

// syntaxError finds the mistake of a document gjson refuses, with
// encoding/json's scanner, which says where it stopped.
func syntaxError(doc []byte) *SyntaxError {
	var raw json.RawMessage
	var se *json.SyntaxError
	if err := json.Unmarshal(doc, &raw); !errors.As(err, &se) || se.Offset < 0 || se.Offset > int64(len(doc)) {
		return &SyntaxError{} // a document only gjson refuses: no place to give
	}
	at, what := int(se.Offset), se.Error()
	switch {
	case len(bytes.TrimSpace(doc)) == 0:
		at, what = 0, "the document is empty"
	case at == len(doc) && what == "unexpected end of JSON input":
		at = lastNonSpace(doc, at-1) + 1 // just after the last thing written
		what = "the document ends before its last value does"
	case at > 0: // the scanner has read the offending byte
		at--
		if c, before := doc[at], lastNonSpace(doc, at-1); (c == '}' || c == ']') && before >= 0 && doc[before] == ',' {
			at = before
			what = "a comma after the last member of an object (JSON allows none)"
			if c == ']' {
				what = "a comma after the last element of an array (JSON allows none)"
			}
		}
	}
	line, col := position(doc, at)
	return &SyntaxError{Offset: at, Line: line, Column: col, What: what}
}

// lastNonSpace is the offset of the last byte before end (end included)
// that is not JSON white space, or -1.
func lastNonSpace(doc []byte, end int) int {
	i := min(end, len(doc)-1)
	for i >= 0 && (doc[i] == ' ' || doc[i] == '\t' || doc[i] == '\n' || doc[i] == '\r') {
		i--
	}
	return i
}

// position is the line and column (from 1; the column in characters) of
// a byte offset of doc.
func position(doc []byte, offset int) (line, column int) {
	offset = max(0, min(offset, len(doc)))
	start := bytes.LastIndexByte(doc[:offset], '\n') + 1
	return bytes.Count(doc[:start], []byte{'\n'}) + 1, utf8.RuneCount(doc[start:offset]) + 1
}
