package main

import "testing"

// A round in which the machine was slow for both plugins is one ratio among
// the rounds' ratios: the medians of the times would set the plugin's slow
// round against the do-nothing plugin's quick ones.
func TestRatioPairsTheRunsOfOneRound(t *testing.T) {
	s := costSamples{
		baseline: []float64{100, 300, 300, 100, 100},
		plugin:   []float64{120, 320, 320, 500, 120},
	}
	if got := s.ratio(); got != 1.2 {
		t.Errorf("ratio %v, want 1.2 (each round's plugin time over its baseline's, the median of those)", got)
	}
	if got, medians := s.added(), median(s.plugin)-median(s.baseline); got != 20 || medians != 220 {
		t.Errorf("added %v, want 20 (medians' difference %v, want 220)", got, medians)
	}
}

// A ratio just over its target is not written as the target: the headline
// would read "1.25× (the target is 1.25× or less: not met)".
func TestRatioAgainstShowsWhichSideOfTheTarget(t *testing.T) {
	for _, tt := range []struct {
		x    float64
		want string
	}{
		{1.2534, "1.253×"},
		{1.2501, "1.2501×"},
		{1.25, "1.25×"},
		{1.2466, "1.25×"},
		{1.31, "1.31×"},
	} {
		if got := ratioAgainst(tt.x, 1.25); got != tt.want {
			t.Errorf("ratioAgainst(%v, 1.25) = %q, want %q", tt.x, got, tt.want)
		}
	}
}
