package gateway

import (
	"errors"
	"strings"

	"github.com/tokenlimit/ai-token-ratelimit/config"
)

// ConfigError is a configuration the plugin refused when it started.
type ConfigError struct {
	// Reason is what the plugin logged at warn level and above while it
	// started, without its log tags: this plugin's one line,
	// "configuration refused: <where>: <what>" (config.Refusal).
	Reason string
}

func (e *ConfigError) Error() string {
	return "the plugin refused its configuration: " + strings.TrimPrefix(e.Reason, refusalLead)
}

// refusalLead starts the plugin's line about a configuration it refuses,
// which the error says already.
var refusalLead = config.Refusal(errors.New(""))
