package configfile

import (
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// FuzzRead: any file is read without a panic, into configurations whose
// JSON is JSON, or into an error that names the file; a refusal at any
// path is said at a line of the file, or at none.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{indented, trailingComma, manifest, "rule_name: x\nrule_items: &a [ {x: *a} ]\n", "---\n---\n- 1\n",
		"a: !!binary aGk=\nb: 2001-12-14t21:59:43.10-05:00\n", "{\"a\": [1, {\"b\": null}]}"} {
		f.Add(seed, false, "rule_items[0].limit_keys[1].key")
		f.Add(seed, true, `_rules_[0]."a b".c`)
	}
	f.Fuzz(func(t *testing.T, data string, isJSON bool, path string) {
		name := "f.yaml"
		if isJSON {
			name = "f.json"
		}
		configs, err := Read(name, []byte(data))
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, name+": ") {
				t.Fatalf("an error that does not name the file: %q", msg)
			}
			return
		}
		if len(configs) == 0 {
			t.Fatal("no configuration and no error")
		}
		for _, c := range configs {
			if !gjson.ValidBytes(c.JSON) {
				t.Fatalf("%s: not JSON: %q", c.Where(), c.JSON)
			}
			e := c.Refused(&config.FieldError{Path: path, Msg: "bad"})
			if e.Line > 0 && (e.Line > strings.Count(data, "\n")+1 || e.Column < 1) {
				t.Fatalf("a place outside the file: %d:%d", e.Line, e.Column)
			}
			_ = e.Error()
		}
	})
}
