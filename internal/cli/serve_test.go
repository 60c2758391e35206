package cli

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"

	"headroom.dev/headroom/internal/testkit"
)

// headroom serve answers on the address it logs and stops cleanly when
// its context ends (main cancels it on SIGINT and SIGTERM).
func TestServeStartsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, logs testkit.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--offline"}, Env{Stdout: &out, Stderr: &logs, Getenv: func(string) string { return "" }})
	}()
	urlRE := regexp.MustCompile(`url=(http://127\.0\.0\.1:\d+/)`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if m := urlRE.FindStringSubmatch(logs.String()); m != nil {
			url = m[1]
		}
	}
	if url == "" {
		t.Fatalf("no URL logged: %s", logs.String())
	}
	resp, err := http.Get(url + "api/gpus")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/gpus: %d", resp.StatusCode)
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitFits {
			t.Errorf("exit %d after the context ended: %s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after its context ended")
	}
}

func TestServeBadListen(t *testing.T) {
	code, _, errs := run(t, nil, "serve", "--listen", "127.0.0.1:99999")
	if code != ExitBadInput || !regexp.MustCompile(`^headroom: --listen 127.0.0.1:99999: .+\n$`).MatchString(errs) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}
