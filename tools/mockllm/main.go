// Command mockllm serves the mock LLM of package llm over HTTP: OpenAI chat
// completions and Responses, Anthropic Messages and Gemini generateContent,
// each reporting a token usage the caller can choose with x-mock-usage.
//
//	cd tools && go run ./mockllm -listen 127.0.0.1:0
//
// It prints "mockllm listening on http://<address>" on stdout once it
// accepts connections (with port 0 the system picks a free port), and one
// line per request on stderr. SIGINT or SIGTERM stop it.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"time"

	"github.com/tokenlimit/ai-token-ratelimit/tools/internal/serve"
	"github.com/tokenlimit/ai-token-ratelimit/tools/mockllm/llm"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on (`host:port`; port 0 picks a free port)")
	quiet := flag.Bool("quiet", false, "do not log requests")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: mockllm [-listen host:port] [-quiet]\n\n"+
			"A mock LLM server reporting token usage (headers x-mock-usage, x-mock-events, x-mock-delay-ms).\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "mockllm: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	log.SetPrefix("mockllm: ")
	if err := run(*listen, *quiet); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

func run(listen string, quiet bool) error {
	var handler http.Handler = llm.New(llm.Options{})
	if !quiet {
		handler = logRequests(handler)
	}
	return serve.Run("mockllm", listen, handler, 3*time.Second)
}

// logRequests logs one line per request once it is answered.
func logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(rec, r)
		gone := ""
		if r.Context().Err() != nil {
			gone = " (client went away)"
		}
		log.Printf("%s %s → %d, %d bytes in %v%s", r.Method, r.URL.RequestURI(), rec.status, rec.bytes,
			time.Since(start).Round(time.Millisecond), gone)
	})
}

// statusRecorder remembers the status and size of a response; Unwrap lets
// http.ResponseController flush through it.
type statusRecorder struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	n, err := s.ResponseWriter.Write(b)
	s.bytes += n
	return n, err
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
