package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"gopkg.in/yaml.v3"
)

// LoadConfig reads a plugin configuration file and returns it as the JSON
// the plugin takes: a .json file as is (it must be valid JSON), any other
// file as YAML converted to JSON.
func LoadConfig(path string) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the plugin configuration: %w", err)
	}
	js, err := ConfigJSON(raw, strings.EqualFold(filepath.Ext(path), ".json"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return js, nil
}

// ConfigJSON converts a configuration document to JSON; isJSON says the
// document is JSON rather than YAML. The top level must be an object.
func ConfigJSON(doc []byte, isJSON bool) ([]byte, error) {
	var v any
	if isJSON {
		if err := json.Unmarshal(doc, &v); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
	} else if err := yaml.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if v == nil {
		return nil, errors.New("the configuration is empty")
	}
	v = jsonable(v)
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("the configuration must be a mapping of fields (rule_name, rule_items…), not a %T", v)
	}
	return json.Marshal(v)
}

// jsonable turns what YAML decodes into values encoding/json accepts:
// mappings with non-string keys get their keys written as strings.
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

// redisSettings are the parts of the plugin's redis section that the
// gateway applies itself, as Envoy does for a Redis cluster: the plugin
// names a service, the gateway knows where it is.
type redisSettings struct {
	timeout            time.Duration
	username, password string
	database           int
}

// Defaults of the plugin's redis section (see the README's configuration table).
const defaultRedisTimeout = time.Second

func readRedisSettings(config []byte) redisSettings {
	r := gjson.GetBytes(config, "redis")
	s := redisSettings{
		timeout:  defaultRedisTimeout,
		username: r.Get("username").String(),
		password: r.Get("password").String(),
		database: int(r.Get("database").Int()),
	}
	if ms := r.Get("timeout").Int(); ms > 0 {
		s.timeout = time.Duration(ms) * time.Millisecond
	}
	return s
}
