package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A name listed twice in a table would be accepted once by readMembers but
// read twice by apply: every table must name each field once.
func TestTablesNameEachFieldOnce(t *testing.T) {
	for name, names := range map[string][]string{
		"top":                    topFields.names(),
		"redis":                  redisFields.names(),
		"token_reservation":      reservationFields.names(),
		"weights":                weightFields.names(),
		"token_weights":          tokenWeightFields.names(),
		"global_threshold":       globalFields.names(),
		"limit key":              limitKeyFields.names(),
		"limit_by_model key":     modelKeyFields[ByModel].names(),
		"limit_by_per_model key": modelKeyFields[ByPerModel].names(),
		"per_model entry":        perModelFields.names(),
		"rule item":              ruleItemFields(),
	} {
		seen := map[string]bool{}
		for _, n := range names {
			require.False(t, seen[n], "%s table names %s twice", name, n)
			seen[n] = true
		}
	}
}

// Parse's documented precedence when several things are wrong: unknown or
// duplicate fields, then values in table order, then combinations.
func TestParseErrorPrecedence(t *testing.T) {
	for _, tt := range []struct{ name, json, want string }{
		{"unknown field before a bad value", withGlobal(`,"rejected_code":1,"rejectd_msg":""`),
			`rejectd_msg: unknown field (did you mean rejected_msg?)`},
		{"values in table order", withGlobal(`,"failure_mode":"open","rejected_code":1`),
			`rejected_code: must be an integer between 100 and 599, got number 1`},
		{"nested values in table order", withGlobal(`,"token_reservation":{"max_body_bytes":0,"enabled":1}`),
			`token_reservation.enabled: must be a boolean, got number 1`},
		{"a value before a combination", withGlobal(`,"max_queue_wait_ms":100,"rejected_code":1`),
			`rejected_code: must be an integer between 100 and 599, got number 1`},
		{"required in table order", `{"rule_name":"r"}`, `redis: required`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseString(tt.json)
			require.EqualError(t, err, tt.want)
		})
	}
}

// Null means "not set" only for known fields: an unknown one is refused
// whatever its value, in every object.
func TestUnknownNullFieldsAreRefused(t *testing.T) {
	for extra, want := range map[string]string{
		`,"token_reservation":{"enable":null}`:                               `token_reservation.enable: unknown field (did you mean enabled?)`,
		`,"token_count_strategy":"weighted","token_weights":{"outptu":null}`: `token_weights.outptu: unknown field (did you mean output?)`,
		`,"redis_":null`: `redis_: unknown field (did you mean redis?)`,
	} {
		_, err := ParseString(withGlobal(extra))
		require.EqualError(t, err, want, extra)
	}
}
