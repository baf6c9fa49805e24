package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// loadConfig reads a plugin configuration file and parses it as the plugin
// does: a .json file as JSON text, any other file as YAML (how gateways and
// the README write it), converted to JSON. The file is refused as the plugin
// would refuse it, with the plugin's message.
func loadConfig(path string) (*config.Config, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	js := string(raw)
	if !strings.EqualFold(filepath.Ext(path), ".json") {
		if js, err = yamlToJSON(raw); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	c, err := config.ParseString(js)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
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

// yamlToJSON converts a YAML configuration document to JSON text. The top
// level must be a mapping.
func yamlToJSON(doc []byte) (string, error) {
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return "", fmt.Errorf("not valid YAML: %w", err)
	}
	if v == nil {
		return "", errors.New("the configuration is empty")
	}
	v = jsonable(v)
	if _, ok := v.(map[string]any); !ok {
		return "", fmt.Errorf("the configuration must be a mapping of fields (rule_name, rule_items…), not a %T", v)
	}
	js, err := json.Marshal(v)
	return string(js), err
}

// jsonable turns what YAML decodes into values encoding/json accepts:
// mappings with non-string keys get their keys written as strings. (The
// same as tools/localgw's, which lives in another module.)
func jsonable(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			v[k] = jsonable(e)
		}
		return v
	case map[any]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range v {
			v[i] = jsonable(e)
		}
		return v
	}
	return v
}
