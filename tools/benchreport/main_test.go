package main

import (
	"io"
	"log"
	"os"
	"testing"
)

// The report program at smoke scale: every measurement runs a few times, and
// the report renders and says what it must (checkReport), so that a change
// to the plugin, to its scripts' replies or to the fixtures that would break
// make bench fails make test first. Nothing is written.
func TestReportRendersAtSmokeScale(t *testing.T) {
	log.SetOutput(io.Discard) // the emulator prints every callout
	defer log.SetOutput(os.Stderr)
	measure(t, scales["smoke"])
}
