package llm

import (
	"encoding/json"
	"net/http"
)

// stream writes one streamed response, flushing every event and pausing
// between events; once the client has gone, every write reports false.
type stream struct {
	w    http.ResponseWriter
	r    *http.Request
	p    params
	sent int    // events written so far
	sep  string // what ends an SSE event
	gone bool
}

// startStream answers 200 with the content type and returns the stream.
func startStream(w http.ResponseWriter, r *http.Request, p params, contentType string) *stream {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := &stream{w: w, r: r, p: p, sep: "\n\n"}
	s.flush()
	return s
}

// startSSE starts a server-sent event stream.
func startSSE(w http.ResponseWriter, r *http.Request, p params) *stream {
	return startStream(w, r, p, "text/event-stream; charset=utf-8")
}

// event writes one SSE event (name may be empty) whose data is v as JSON.
func (s *stream) event(name string, v any) bool {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // the mock's own types always marshal
	}
	return s.eventData(name, string(data))
}

// eventData writes one SSE event with raw data.
func (s *stream) eventData(name, data string) bool {
	msg := "data: " + data + s.sep
	if name != "" {
		msg = "event: " + name + s.sep[:len(s.sep)/2] + msg
	}
	return s.write(msg)
}

// write writes one event's bytes after the pause between events, and flushes.
func (s *stream) write(msg string) bool {
	if s.gone {
		return false
	}
	if s.sent > 0 && !s.p.pause(s.r, 1) {
		s.gone = true
		return false
	}
	s.sent++
	if _, err := s.w.Write([]byte(msg)); err != nil {
		s.gone = true
		return false
	}
	return s.flush()
}

func (s *stream) flush() bool {
	if err := http.NewResponseController(s.w).Flush(); err != nil {
		s.gone = true
	}
	return !s.gone
}
