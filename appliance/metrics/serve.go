package metrics

import (
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve listens on listen ("host:port") and serves h at /metrics in the
// background, so a bad address fails here. The returned server's Addr is the
// bound address; stop it with Shutdown or Close.
func Serve(listen string, h http.Handler) (*http.Server, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("metrics listen %s: %w", listen, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "linerate: metrics are at /metrics")
	})
	srv := &http.Server{
		Addr:              l.Addr().String(),
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go srv.Serve(l) // returns http.ErrServerClosed on Shutdown
	return srv, nil
}
