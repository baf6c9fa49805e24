// Package serve runs the repository's small HTTP commands (the mock LLM and
// the local gateway) until Ctrl-C or SIGTERM, then shuts them down gently.
package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Run listens on addr, prints "<name> listening on http://<address>" (the
// line scripts read the chosen port from), and serves h until a signal;
// requests still open grace after it are cut.
func Run(name, addr string, h http.Handler, grace time.Duration) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("cannot listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("%s listening on http://%s\n", name, l.Addr())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close() // streams still open after the grace period are cut
	}
	return nil
}
