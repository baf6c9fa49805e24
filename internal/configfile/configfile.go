// Package configfile reads the plugin's configuration files for the tools
// that take one, atrl and make run's local gateway, so that both read a
// file alike and word a mistake alike.
//
// A file is a configuration in YAML, or in JSON when its name ends in
// .json (the whole document the gateway hands the plugin: a global
// configuration and any _rules_), or a Higress WasmPlugin manifest
// (extensions.higress.io/v1alpha1, kind WasmPlugin; one YAML document of
// several, the others ignored), whose spec.defaultConfig and each
// spec.matchRules[i].config are configurations of their own. Read returns
// each configuration as the JSON the plugin parses (config.ParseDocument).
//
// A mistake is an *Error at its line and column, with the line shown: YAML
// or JSON that does not parse, and, through Config.Refused, a field the
// plugin refuses, found in the file by the path the plugin names.
//
// It is the tools' alone: the plugin reads JSON from the gateway, and does
// not link the YAML reader (github.com/goccy/go-yaml, which keeps every
// node's place, where gopkg.in/yaml.v3 named the enclosing block's line).
package configfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/tidwall/gjson"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// MaxFileBytes bounds a configuration file: a gateway's configuration is
// kilobytes.
const MaxFileBytes = 16 << 20

// Higress's WasmPlugin resource.
const (
	wasmPluginGroup = "extensions.higress.io/"
	wasmPluginKind  = "WasmPlugin"
)

// Config is one configuration of a file.
type Config struct {
	// Name says which configuration of a manifest it is: "defaultConfig",
	// or "matchRules[0] (ingress default/llm-chat)" (what the rule
	// matches); with several WasmPlugins in the file, the plugin's name
	// first ("WasmPlugin ai-token-ratelimit: defaultConfig"). "" for a file
	// that is one configuration.
	Name string
	// JSON is the configuration as the gateway hands it to the plugin;
	// for a .json file, the file itself.
	JSON []byte

	file *file
	doc  int    // its YAML document in file.docs
	at   []step // its place in the document ([] for the whole document)
}

// Where names the configuration in messages: the file, and the
// configuration's name in a manifest.
func (c *Config) Where() string {
	if c.Name == "" {
		return c.file.name
	}
	return c.file.name + ": " + c.Name
}

// Refused is the error to print for the configuration when the plugin
// refuses it (err from config.ParseDocument or config.Parse of c.JSON):
// the plugin's line (config.Refusal), at the place in the file of the
// field it names, or of the nearest enclosing one the file has.
func (c *Config) Refused(err error) *Error {
	var p place
	var fe *config.FieldError
	if errors.As(err, &fe) {
		p = c.file.find(c.doc, append(append([]step(nil), c.at...), parsePath(fe.Path)...))
	}
	return c.file.errorAt(c.Name, config.Refusal(err), p)
}

// file is a configuration file being read.
type file struct {
	name  string
	data  []byte
	lines []string
	docs  []document // its YAML documents, when it was read as YAML
}

// document is one YAML document of a file: its tree, and the line of the
// file its text starts at (goccy numbers the lines of each document's text
// from 1).
type document struct {
	body      ast.Node
	firstLine int
}

// Load reads the file at path (see Read).
func Load(path string) ([]Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, readError(path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, readError(path, err)
	}
	if len(data) > MaxFileBytes {
		return nil, &Error{File: path, Msg: fmt.Sprintf("larger than %d MiB: not a configuration", MaxFileBytes>>20)}
	}
	return Read(path, data)
}

func readError(path string, err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is said once
	}
	return &Error{File: path, Msg: "cannot be read: " + err.Error(), Err: err}
}

// Read reads the configurations of a file's content; name is the file's,
// for messages and its extension (.json: JSON, anything else YAML). It
// returns at least one configuration, or an *Error.
func Read(name string, data []byte) (configs []Config, err error) {
	f := &file{name: name, data: data, lines: strings.Split(string(data), "\n")}
	if strings.EqualFold(filepath.Ext(name), ".json") {
		if se := config.CheckJSON(data); se != nil {
			return nil, f.errorAt("", se.Error(), place{se.Line, se.Column})
		}
		if !looksLikeManifest(data) {
			// As it is: the text the gateway would hand the plugin. Its
			// tree, for the places of refused fields, is read if needed.
			return []Config{{JSON: data, file: f, doc: -1}}, nil
		}
	}
	defer func() {
		if r := recover(); r != nil { // the YAML reader's bug, not the file's
			configs, err = nil, f.errorAt("", fmt.Sprintf("the YAML reader failed on this file (%v)", r), place{})
		}
	}()
	if err := f.parse(); err != nil {
		return nil, err
	}
	return f.configs()
}

// looksLikeManifest says whether a JSON document is a Kubernetes object
// (apiVersion and kind at the top), which is read as YAML is.
func looksLikeManifest(data []byte) bool {
	return gjson.GetBytes(data, "apiVersion").Exists() && gjson.GetBytes(data, "kind").Exists()
}

// documentMarker is a line that starts a YAML document.
var documentMarker = regexp.MustCompile(`(?m)^---(?:[ \t].*)?\r?$`)

// parse reads the file's YAML documents. Each is parsed alone, from its
// "---" line: goccy/go-yaml drops a document that follows an empty one.
// (A line starting "---" cannot be inside a YAML scalar, so the split is
// YAML's own.)
func (f *file) parse() error {
	if at := tooDeep(f.data); at >= 0 {
		line, col := position(f.data, at)
		return f.errorAt("", fmt.Sprintf("nests lists and mappings deeper than %d levels: not a configuration", maxNesting), place{line, col})
	}
	starts := []int{0}
	for _, m := range documentMarker.FindAllIndex(f.data, -1) {
		if m[0] > 0 {
			starts = append(starts, m[0])
		}
	}
	starts = append(starts, len(f.data))
	for i := 0; i+1 < len(starts); i++ {
		text := f.data[starts[i]:starts[i+1]]
		firstLine := bytes.Count(f.data[:starts[i]], []byte{'\n'}) + 1
		parsed, err := parser.ParseBytes(text, 0)
		if err != nil {
			return f.yamlError(err, firstLine)
		}
		for _, d := range parsed.Docs {
			if d != nil && d.Body != nil {
				f.docs = append(f.docs, document{body: d.Body, firstLine: firstLine})
			}
		}
	}
	return nil
}

// yamlError is the Error of goccy/go-yaml's err, in a document whose text
// starts at line firstLine.
func (f *file) yamlError(err error, firstLine int) *Error {
	var ye yaml.Error
	if !errors.As(err, &ye) || ye.GetToken() == nil || ye.GetToken().Position == nil {
		return f.errorAt("", "invalid YAML: "+err.Error(), place{})
	}
	p := place{ye.GetToken().Position.Line + firstLine - 1, ye.GetToken().Position.Column}
	// Its message names other places as [line:column], of the document.
	msg := yamlPlace.ReplaceAllStringFunc(ye.GetMessage(), func(s string) string {
		m := yamlPlace.FindStringSubmatch(s)
		line, _ := strconv.Atoi(m[1])
		return "line " + strconv.Itoa(line+firstLine-1) + ", column " + m[2]
	})
	return f.errorAt("", fmt.Sprintf("invalid YAML at line %d, column %d: %s", p.line, p.column, msg), p)
}

var yamlPlace = regexp.MustCompile(`\[(\d+):(\d+)\]`)

// configs finds the configurations of the file's YAML documents: the
// document itself when the file is one configuration, the WasmPlugins'
// when it is a manifest.
func (f *file) configs() ([]Config, error) {
	if len(f.docs) == 0 {
		return nil, f.errorAt("", "the configuration is empty", place{})
	}
	values := make([]any, len(f.docs))
	var objects, plugins []int
	for i, d := range f.docs {
		if expandedSize(d.body, map[string]int{}) > maxValues {
			return nil, f.errorAt("", fmt.Sprintf("its aliases expand it past %d values: not a configuration", maxValues), f.docPlace(i, nil))
		}
		if err := yaml.NodeToValue(d.body, &values[i], yaml.UseOrderedMap()); err != nil {
			return nil, f.yamlError(err, d.firstLine)
		}
		m, _ := values[i].(yaml.MapSlice)
		apiVersion, hasVersion := get(m, "apiVersion")
		kind, hasKind := get(m, "kind")
		if !hasVersion || !hasKind {
			continue
		}
		objects = append(objects, i)
		if s, _ := apiVersion.(string); strings.HasPrefix(s, wasmPluginGroup) && kind == wasmPluginKind {
			plugins = append(plugins, i)
		}
	}
	if len(objects) == 0 {
		if len(f.docs) > 1 {
			return nil, f.errorAt("", fmt.Sprintf("%d YAML documents, and none is a WasmPlugin (%s%s): a configuration is one document",
				len(f.docs), wasmPluginGroup, wasmPluginKind), f.docPlace(1, nil))
		}
		c, err := f.config(0, "", nil, values[0])
		if err != nil {
			return nil, err
		}
		return []Config{c}, nil
	}
	if len(objects) < len(f.docs) {
		i := 0
		for i < len(objects) && objects[i] == i {
			i++
		}
		return nil, f.errorAt("", "a YAML document without apiVersion and kind, in a manifest: every document must be a Kubernetes object", f.docPlace(i, nil))
	}
	if len(plugins) == 0 {
		e := f.errorAt("", ErrNoPlugin.Error(), place{})
		e.Err = ErrNoPlugin
		return nil, e
	}
	var configs []Config
	for _, i := range plugins {
		prefix := ""
		if len(plugins) > 1 {
			name, _ := get(lookupMap(values[i], "metadata"), "name")
			prefix = fmt.Sprintf("WasmPlugin %v: ", name)
		}
		cs, err := f.pluginConfigs(i, prefix, values[i])
		if err != nil {
			return nil, err
		}
		configs = append(configs, cs...)
	}
	return configs, nil
}

// pluginConfigs are the configurations of the WasmPlugin of document doc:
// spec.defaultConfig (unless spec.defaultConfigDisable), then each
// spec.matchRules[i].config (unless its configDisable: the plugin does
// not run there). A match rule without a config hands the plugin an empty
// one, which it refuses.
func (f *file) pluginConfigs(doc int, prefix string, v any) ([]Config, error) {
	spec := lookupMap(v, "spec")
	var configs []Config
	if dc, ok := get(spec, "defaultConfig"); ok && dc != nil && !isTrue(spec, "defaultConfigDisable") {
		c, err := f.config(doc, prefix+"defaultConfig", []step{{key: "spec"}, {key: "defaultConfig"}}, dc)
		if err != nil {
			return nil, err
		}
		configs = append(configs, c)
	}
	rules, _ := get(spec, "matchRules")
	list, isList := rules.([]any)
	if rules != nil && !isList {
		return nil, f.errorAt(prefix, "spec.matchRules must be a list, got "+describe(rules), f.docPlace(doc, []step{{key: "spec"}, {key: "matchRules"}}))
	}
	for i, r := range list {
		at := []step{{key: "spec"}, {key: "matchRules"}, {index: i, isIndex: true}}
		rule, isMap := r.(yaml.MapSlice)
		if !isMap {
			return nil, f.errorAt(prefix, fmt.Sprintf("spec.matchRules[%d] must be a mapping (ingress, domain, service, config), got %s", i, describe(r)), f.docPlace(doc, at))
		}
		if isTrue(rule, "configDisable") {
			continue
		}
		name := fmt.Sprintf("%smatchRules[%d]", prefix, i)
		if match := describeMatch(rule); match != "" {
			name += " (" + match + ")"
		}
		cfg, ok := get(rule, "config")
		if !ok || cfg == nil {
			configs = append(configs, Config{Name: name, JSON: []byte("{}"), file: f, doc: doc, at: at})
			continue
		}
		c, err := f.config(doc, name, append(at, step{key: "config"}), cfg)
		if err != nil {
			return nil, err
		}
		configs = append(configs, c)
	}
	if len(configs) == 0 {
		return nil, f.errorAt(strings.TrimSuffix(prefix, ": "), "the WasmPlugin has no configuration: no spec.defaultConfig, and no spec.matchRules[].config",
			f.docPlace(doc, []step{{key: "spec"}}))
	}
	return configs, nil
}

// describeMatch says what a match rule matches: "ingress default/llm-chat;
// domain *.example.com".
func describeMatch(rule yaml.MapSlice) string {
	var parts []string
	for _, field := range []string{"ingress", "domain", "service"} {
		v, _ := get(rule, field)
		var names []string
		switch v := v.(type) {
		case []any:
			for _, n := range v {
				names = append(names, fmt.Sprint(n))
			}
		case nil:
		default:
			names = append(names, fmt.Sprint(v))
		}
		if len(names) > 0 {
			parts = append(parts, field+" "+strings.Join(names, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// config is the configuration v, at `at` in document doc: it must be a
// mapping of fields.
func (f *file) config(doc int, name string, at []step, v any) (Config, error) {
	if _, ok := v.(yaml.MapSlice); !ok {
		return Config{}, f.errorAt(name, "the configuration must be a mapping of fields (rule_name, rule_items…), not "+describe(v), f.docPlace(doc, at))
	}
	var b bytes.Buffer
	if err := writeJSON(&b, v, nil); err != nil {
		var je *jsonError
		if errors.As(err, &je) {
			return Config{}, f.errorAt(name, je.Error(), f.docPlace(doc, append(append([]step(nil), at...), je.path...)))
		}
		return Config{}, f.errorAt(name, err.Error(), f.docPlace(doc, at))
	}
	return Config{Name: name, JSON: b.Bytes(), file: f, doc: doc, at: at}, nil
}

// describe names the type of a YAML value in messages.
func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "nothing"
	case []any:
		return "a list"
	case string:
		return "a string " + strconv.Quote(v)
	case bool:
		return "a boolean"
	case yaml.MapSlice:
		return "a mapping"
	}
	return "a number"
}

// get is the value of key in a mapping, and whether it is there.
func get(m yaml.MapSlice, key string) (any, bool) {
	for _, item := range m {
		if k, ok := item.Key.(string); ok && k == key {
			return item.Value, true
		}
	}
	return nil, false
}

// lookupMap is the mapping at key of the mapping v (nil when not there).
func lookupMap(v any, key string) yaml.MapSlice {
	m, _ := v.(yaml.MapSlice)
	sub, _ := get(m, key)
	s, _ := sub.(yaml.MapSlice)
	return s
}

func isTrue(m yaml.MapSlice, key string) bool {
	v, _ := get(m, key)
	return v == true
}
