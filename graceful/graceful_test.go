package graceful

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A request in flight when the context ends finishes after the listener
// has closed; Serve then returns nil.
func TestServeFinishesRequestsInFlight(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		io.WriteString(w, "done")
	})}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, ln) }()

	body := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			body <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body <- string(b)
	}()
	<-entered
	cancel()
	// Release the handler only once Shutdown has closed the listener.
	for deadline := time.Now().Add(5 * time.Second); ; {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("the listener was not closed after the context ended")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if got := <-body; got != "done" {
		t.Errorf("request in flight got %q", got)
	}
	if err := <-served; err != nil {
		t.Errorf("Serve returned %v", err)
	}
}
