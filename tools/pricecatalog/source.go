package main

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The input: what dump.mjs prints, the providers of @pydantic/genai-prices
// as its bundled data has them (its dist/index.d.ts: Provider, ModelInfo,
// MatchLogic, ConditionalPrice, ModelPrice, TieredPrices). Only what the
// catalog uses is read; every number is kept as its decimal text.

// source is dump.mjs's output.
type source struct {
	Package   string           `json:"package"`
	Version   string           `json:"version"`
	License   string           `json:"license"`
	Homepage  string           `json:"homepage"`
	Providers []sourceProvider `json:"providers"`
}

type sourceProvider struct {
	ID            string          `json:"id"`
	ModelMatch    json.RawMessage `json:"model_match"`    // MatchLogic, or absent
	ProviderMatch json.RawMessage `json:"provider_match"` // MatchLogic, or absent
	Fallbacks     []string        `json:"fallback_model_providers"`
	Models        []sourceModel   `json:"models"`
}

type sourceModel struct {
	ID         string          `json:"id"`
	Match      json.RawMessage `json:"match"`  // MatchLogic
	Prices     json.RawMessage `json:"prices"` // ModelPrice, or a list of ConditionalPrice
	Deprecated bool            `json:"deprecated"`
}

// conditionalPrice is a ConditionalPrice: prices in force from a date, or
// at a time of day. The library also reads a constraint without its type
// (the data's older shape): the keys say which.
type conditionalPrice struct {
	Constraint *struct {
		Type      string `json:"type"`
		StartDate string `json:"start_date"`
		StartTime string `json:"start_time"`
		EndTime   string `json:"end_time"`
	} `json:"constraint"`
	Prices json.RawMessage `json:"prices"`
}

// tieredPrice is a TieredPrices: base, and the price of every token of a
// request whose input tokens are more than a tier's start.
type tieredPrice struct {
	Base  json.Number `json:"base"`
	Tiers []struct {
		Start json.Number `json:"start"`
		Price json.Number `json:"price"`
	} `json:"tiers"`
}

// decodeStrict decodes JSON keeping numbers as their text and refusing
// unknown fields (a shape the generator does not know must not be read as
// something it is not).
func decodeStrict(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// readSource reads dump.mjs's output.
func readSource(data []byte) (*source, error) {
	var s source
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&s); err != nil {
		return nil, fmt.Errorf("reading the dump: %w", err)
	}
	if s.Package == "" || s.Version == "" || s.License == "" || s.Homepage == "" || len(s.Providers) == 0 {
		return nil, fmt.Errorf("reading the dump: no package, version, license, homepage or providers")
	}
	return &s, nil
}
