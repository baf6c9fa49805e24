package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tokenlimit/ai-token-ratelimit/config"
	"github.com/tokenlimit/ai-token-ratelimit/internal/configfile"
)

// namedConfig is one configuration of a file, parsed as the plugin parses
// it.
type namedConfig struct {
	// name says which one it is: "" for a file that is one configuration
	// (or a document's global one), "defaultConfig", "matchRules[0]
	// (ingress default/llm-chat)" in a WasmPlugin manifest, "_rules_[1]
	// (route chat)" for a rule of a document.
	name  string
	rules *config.Config
}

// loadConfigs reads a configuration file (package configfile: YAML, JSON
// when it ends in .json, or a WasmPlugin manifest) and parses each of its
// configurations as the plugin does when it starts (config.ParseDocument:
// the global configuration and each rule of _rules_ are one each). A file
// that cannot be read, or that the plugin refuses, is a *configfile.Error:
// the file, the place, the plugin's line.
func loadConfigs(path string) ([]namedConfig, error) {
	files, err := configfile.Load(path)
	if err != nil {
		return nil, err
	}
	var out []namedConfig
	for i := range files {
		f := &files[i]
		d, err := config.ParseDocument(f.JSON)
		if err != nil {
			return nil, f.Refused(err)
		}
		if d.Global != nil {
			out = append(out, namedConfig{name: f.Name, rules: d.Global})
		}
		for j, r := range d.Rules {
			name := config.RulesKey + "[" + strconv.Itoa(j) + "] (" + describeMatch(r) + ")"
			if f.Name != "" {
				name = f.Name + ": " + name
			}
			out = append(out, namedConfig{name: name, rules: r.Config})
		}
	}
	return out, nil
}

// pickConfig is the configuration a command acts on: the file's only one,
// or the one whose rule_name is rule, or whose name (or its head,
// "matchRules[0]") is.
func pickConfig(path string, all []namedConfig, rule string) (*namedConfig, error) {
	if rule == "" && len(all) > 1 {
		return nil, fmt.Errorf("%s holds %d configurations (%s): choose one with -rule NAME", path, len(all), listConfigs(all))
	}
	found, err := pickConfigs(path, all, rule)
	if err != nil {
		return nil, err
	}
	if len(found) > 1 {
		return nil, fmt.Errorf("-rule %s: %d configurations of %s have that rule_name (%s): give the name of one instead", rule, len(found), path, listConfigs(found))
	}
	return &found[0], nil
}

// pickConfigs are the configurations a command on all of them acts on:
// every one, or those -rule names (see pickConfig).
func pickConfigs(path string, all []namedConfig, rule string) ([]namedConfig, error) {
	if rule == "" {
		return all, nil
	}
	var found []namedConfig
	for _, c := range all {
		if c.rules.RuleName == rule || c.name == rule || shortName(c.name) == rule {
			found = append(found, c)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("-rule %s: no configuration of %s has that rule_name or name (%s)", rule, path, listConfigs(all))
	}
	return found, nil
}

// shortName is a configuration's name without what it matches:
// "matchRules[0]" for "matchRules[0] (ingress default/llm-chat)".
func shortName(name string) string {
	head, _, _ := strings.Cut(name, " (")
	return head
}

// listConfigs names configurations in a message: `defaultConfig: rule
// "consumers"; matchRules[0] (ingress default/llm-chat): rule "llm-chat"`.
func listConfigs(cs []namedConfig) string {
	parts := make([]string, len(cs))
	for i, c := range cs {
		parts[i] = configLabel(c.name, c.rules)
	}
	return strings.Join(parts, "; ")
}

// configLabel names a configuration: `matchRules[0] (ingress
// default/llm-chat): rule "llm-chat"`, or `rule "chat"` when it has no name.
func configLabel(name string, rules *config.Config) string {
	label := "rule " + strconv.Quote(rules.RuleName)
	if name != "" {
		label = name + ": " + label
	}
	return label
}

// defaultConfig returns the configuration every optional field left at its
// default: the cost (token_count_strategy total_tokens) and bytes_per_token
// the plugin uses when a configuration does not set them. The config package
// keeps its defaults in Parse alone, so a minimal configuration is parsed;
// its rule and Redis service play no part here.
func defaultConfig() *config.Config {
	c, err := config.ParseString(`{"rule_name":"atrl","global_threshold":{"token_per_minute":1},"redis":{"service_name":"redis.static"}}`)
	if err != nil {
		panic("the minimal configuration is refused: " + err.Error())
	}
	return c
}
