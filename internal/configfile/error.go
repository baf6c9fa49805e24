package configfile

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Error is a configuration file the tools cannot take: one that cannot be
// read, is not YAML or JSON, or that the plugin refuses. It prints as the
// file's name, the configuration's (in a manifest), the message, and, when
// the place is known, the line of the file with a caret under the place:
//
//	plugin.yaml: invalid YAML at line 6, column 8: value is not allowed in this context
//	    6 |        token_per_minute: 100
//	      |        ^
type Error struct {
	File string
	// Config names the configuration of a manifest ("defaultConfig",
	// "matchRules[0] (ingress default/llm-chat)"); "" for the file as a whole.
	Config string
	// Msg is what is wrong, e.g. "configuration refused: rule_items[0]...:
	// must be a positive integer, got number 0", as the plugin logs it.
	Msg string
	// Line and Column are the place in the file, from 1 (Column counts
	// characters); 0 when unknown.
	Line, Column int
	// Text is the file's line Line, as it is (without its line break).
	Text string
	// Err is the cause, for errors.Is: the file system's error of a file
	// that cannot be read, ErrNoPlugin.
	Err error
}

// ErrNoPlugin is a manifest without a WasmPlugin.
var ErrNoPlugin = errors.New("a manifest without a WasmPlugin (extensions.higress.io/v1alpha1, kind WasmPlugin)")

func (e *Error) Unwrap() error { return e.Err }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	b.WriteString(": ")
	if e.Config != "" {
		b.WriteString(e.Config)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 {
		b.WriteByte('\n')
		writeExcerpt(&b, e.Line, e.Column, e.Text)
	}
	return b.String()
}

// Excerpt bounds: a line longer than excerptWidth characters (minified
// JSON) is shown around the place only.
const (
	excerptWidth  = 100
	excerptBefore = 60 // characters shown before the place, at most
	gutterWidth   = 5  // the line number's width, at least
)

// writeExcerpt writes the line text, numbered, and a caret under column
// col, indented alike.
func writeExcerpt(b *strings.Builder, line, col int, text string) {
	runes := []rune(strings.TrimRight(text, "\r"))
	col = max(1, min(col, len(runes)+1))
	start, end, head, tail := 0, len(runes), "", ""
	if len(runes) > excerptWidth {
		start = max(0, min(col-1-excerptBefore, len(runes)-excerptWidth))
		end = start + excerptWidth
		if start > 0 {
			head = "..."
		}
		if end < len(runes) {
			tail = "..."
		}
	}
	shown := runes[start:end]
	num := strconv.Itoa(line)
	pad := strings.Repeat(" ", max(0, gutterWidth-len(num)))
	b.WriteString(pad + num + " | " + head)
	caret := strings.Repeat(" ", len(head))
	for i, r := range shown {
		switch {
		case r == '\t':
			b.WriteRune(r)
		case !unicode.IsPrint(r) || r == utf8.RuneError:
			b.WriteRune('?') // a control character would move the terminal's cursor
		default:
			b.WriteRune(r)
		}
		if i < col-1-start {
			if r == '\t' {
				caret += "\t"
			} else {
				caret += " "
			}
		}
	}
	b.WriteString(tail + "\n" + pad + strings.Repeat(" ", len(num)) + " | " + caret + "^")
}

// position is the line and column, from 1 (the column in characters), of a
// byte offset of data.
func position(data []byte, offset int) (line, column int) {
	offset = max(0, min(offset, len(data)))
	start := bytes.LastIndexByte(data[:offset], '\n') + 1
	return bytes.Count(data[:start], []byte{'\n'}) + 1, utf8.RuneCount(data[start:offset]) + 1
}

// place is a position in the file: line and column from 1.
type place struct{ line, column int }

// errorAt is an Error of the file at p (p.line 0: no place; a blank line
// is not shown).
func (f *file) errorAt(config, msg string, p place) *Error {
	e := &Error{File: f.name, Config: config, Msg: msg}
	if p.line > 0 && p.line <= len(f.lines) && strings.TrimSpace(f.lines[p.line-1]) != "" {
		e.Line, e.Column, e.Text = p.line, p.column, f.lines[p.line-1]
	}
	return e
}
