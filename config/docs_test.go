package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The README is the page a user reads first: what the plugin does, how to
// start it, the common configurations. The rest lives in docs/.
func TestReadmeSize(t *testing.T) {
	info, err := os.Stat("../README.md")
	require.NoError(t, err)
	assert.LessOrEqual(t, info.Size(), int64(25000),
		"README.md is %d bytes: move details to a page of docs/ and link it", info.Size())
}

// Every relative link of the README and of docs/*.md reaches a file that
// exists, and its #anchor, if any, a heading of that page.
func TestDocsLinks(t *testing.T) {
	anchors := map[string]map[string]bool{} // page (clean path) -> its heading anchors
	pageAnchors := func(page string) map[string]bool {
		if a, ok := anchors[page]; ok {
			return a
		}
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		prose, _ := splitMarkdown(string(text))
		a := headingAnchors(prose)
		anchors[page] = a
		return a
	}
	checked := 0
	for _, file := range docFiles(t) {
		text, err := os.ReadFile(file)
		require.NoError(t, err)
		prose, lines := splitMarkdown(string(text))
		for _, l := range linkTargets(prose) {
			target := l.target
			checked++
			where := fmt.Sprintf("%s:%d: link %q", strings.TrimPrefix(file, "../"), lines[l.line], target)
			path, anchor, _ := strings.Cut(target, "#")
			page := filepath.Clean(file)
			if path != "" {
				page = filepath.Join(filepath.Dir(file), path)
				if _, err := os.Stat(page); err != nil {
					t.Errorf("%s: no such file %s", where, strings.TrimPrefix(page, "../"))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(page, ".md") {
				t.Errorf("%s: an anchor in a file that is not Markdown", where)
				continue
			}
			if !pageAnchors(page)[anchor] {
				t.Errorf("%s: %s has no heading with the anchor #%s", where, strings.TrimPrefix(page, "../"), anchor)
			}
		}
	}
	require.Greater(t, checked, 50, "found almost no links: is the link pattern still right?")
}

// TestDocsHeadingAnchor holds headingAnchors to GitHub's rules, and
// linkTargets to what a link is.
func TestDocsHeadingAnchor(t *testing.T) {
	got := headingAnchors([]string{
		"# Quick start",
		"## Hierarchies: org > team > key",
		"### Reservation: limits that hold under concurrency",
		"## Deploy on Higress (WasmPlugin, OCI image)",
		"## Options of `make run`",
		"## See [the quota](docs/clients.md) now",
		"## Examples",
		"## Examples",
		"not a heading",
		"#not a heading either",
	})
	want := map[string]bool{
		"quick-start": true, "hierarchies-org--team--key": true,
		"reservation-limits-that-hold-under-concurrency": true,
		"deploy-on-higress-wasmplugin-oci-image":         true,
		"options-of-make-run":                            true, "see-the-quota-now": true,
		"examples": true, "examples-1": true,
	}
	assert.Equal(t, want, got)
	assert.Equal(t, []link{{"docs/a.md#x", 0}, {"b.md", 0}, {"#d", 3}},
		linkTargets([]string{
			"see [a](docs/a.md#x), ![b](b.md \"title\"), [web](https://example.com), `[code](c.md)`",
			"and `a code span [over](two.md)",
			"lines` and [a link over", "lines](#d)"}))
}

var (
	fenceLine  = regexp.MustCompile("^[ \t]*(```|~~~)")
	headingRe  = regexp.MustCompile(`^(#{1,6})[ \t]+(.*?)[ \t#]*$`)
	inlineLink = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	linkRe     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("``[^`]+``|`[^`]+`") // may span lines
	schemeRe   = regexp.MustCompile(`^([a-zA-Z][a-zA-Z0-9+.-]*:|//)`)
)

// splitMarkdown returns a page's lines outside fenced code blocks, and the
// line number (from 1) of each.
func splitMarkdown(text string) (prose []string, lineNumbers []int) {
	inFence := false
	for i, line := range strings.Split(text, "\n") {
		if fenceLine.MatchString(line) {
			inFence = !inFence
			continue
		}
		if !inFence {
			prose = append(prose, line)
			lineNumbers = append(lineNumbers, i+1)
		}
	}
	return prose, lineNumbers
}

// headingAnchors are the anchors GitHub gives a page's headings: the text as
// shown, lower-cased, spaces turned to '-', punctuation other than '-' and
// '_' dropped; a repeated anchor gets -1, -2…
func headingAnchors(prose []string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, line := range prose {
		m := headingRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := inlineLink.ReplaceAllString(m[2], "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// link is a relative link target, and the index in the prose of the line
// it is on.
type link struct {
	target string
	line   int
}

// linkTargets are the relative link targets of a page's prose (links to
// other sites, and text in code spans, left out).
func linkTargets(prose []string) []link {
	text := codeSpan.ReplaceAllStringFunc(strings.Join(prose, "\n"), func(span string) string {
		return strings.Repeat("\n", strings.Count(span, "\n")) // keep the line numbers
	})
	var links []link
	for _, m := range linkRe.FindAllStringSubmatchIndex(text, -1) {
		target := text[m[2]:m[3]]
		if !schemeRe.MatchString(target) {
			links = append(links, link{target, strings.Count(text[:m[0]], "\n")})
		}
	}
	return links
}
