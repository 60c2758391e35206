package hostile

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// from is a client whose connections come from a loopback address of its
// own (127.0.0.0/8 is all loopback on Linux), so that the servers see two
// clients where a test has two.
func from(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// drip sends a POST from ip to addr whose body of n bytes comes one byte
// every interval, for at most limit, and returns the status it got (0
// when none came).
func drip(addr, ip, path string, n int, interval, limit time.Duration) int {
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(limit))
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, n)
	status := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			status <- 0
			return
		}
		io.Copy(io.Discard, resp.Body)
		status <- resp.StatusCode
	}()
	for range n {
		select {
		case s := <-status:
			return s
		case <-time.After(interval):
		}
		if _, err := c.Write([]byte(" ")); err != nil {
			break
		}
	}
	return <-status
}

// Ten requests of one client whose bodies drip held every slot and place
// of serve's plans for the 30 s read timeout, and every other client got
// 429. Now a body holds its slot at most 10 s (408), the dripping client
// cannot keep another out of the queue, and the other client's plan is
// answered as soon as a slot frees.
func TestServeDrippingBodies(t *testing.T) {
	p := start(t, serveAddr, "serve", "--listen", "127.0.0.1:0", "--offline")
	var wg sync.WaitGroup
	codes := make([]int, 10)
	for i := range codes {
		wg.Go(func() { codes[i] = drip(p.addr, "127.0.0.2", "/api/plan", 300, 500*time.Millisecond, 25*time.Second) })
	}
	time.Sleep(2 * time.Second) // the drippers are admitted: 2 at work, 8 waiting
	begin := time.Now()
	a := do(from("127.0.0.3"), http.MethodPost, "http://"+p.addr+"/api/plan", "application/json",
		[]byte(`{"model":"meta-llama/Llama-3.1-8B-Instruct","gpu":"H100-80GB"}`))
	took := time.Since(begin)
	apiWellFormed(t, "the other client's plan", a, http.StatusOK)
	t.Logf("the other client's plan answered %d after %s", a.status, took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Errorf("the other client waited %s", took)
	}
	wg.Wait()
	got := map[int]int{}
	for _, c := range codes {
		got[c]++
	}
	t.Logf("the dripping bodies: %v", got)
	if got[http.StatusRequestTimeout] == 0 || got[http.StatusOK] > 0 {
		t.Errorf("the dripping bodies got %v; want 408 for those that held a slot", got)
	}
	p.alive(t)
}

var simServeAddr = regexp.MustCompile(`serving \S+ on http://(\S+) `)

// simulate --serve: two clients declaring 10 GB bodies held both of its
// large-body slots for a minute. A declared body past the 32 MiB bound is
// refused at once (413); bodies that drip hold a slot at most 10 s and
// leave the queue to other clients.
func TestSimulateServeDrippingBodies(t *testing.T) {
	p := start(t, simServeAddr, "simulate", "--serve", "--listen", "127.0.0.1:0", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-80GB", "--offline")
	for _, ip := range []string{"127.0.0.2", "127.0.0.4"} {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		c, err := d.Dial("tcp", p.addr)
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		fmt.Fprintf(c, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", int64(10)<<30)
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("a declared 10 GB body from %s: %v %v", ip, resp, err)
		} else {
			t.Logf("a declared 10 GB body: %d after %s", resp.StatusCode, time.Since(begin).Round(time.Millisecond))
		}
		c.Close()
	}
	var wg sync.WaitGroup
	codes := make([]int, 8)
	for i := range codes {
		wg.Go(func() {
			codes[i] = drip(p.addr, "127.0.0.2", "/v1/completions", 100<<10, 500*time.Millisecond, 15*time.Second)
		})
	}
	time.Sleep(2 * time.Second)
	// A large body (over the 64 KiB decoded without the gate) from another
	// client.
	body := []byte(`{"prompt":"` + strings.Repeat("a ", 40_000) + `","max_tokens":1}`)
	begin := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/v1/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := from("127.0.0.3").Do(req)
	if err != nil {
		t.Fatalf("the other client: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(begin)
	t.Logf("the other client's completion: %d after %s", resp.StatusCode, took.Round(time.Millisecond))
	if resp.StatusCode != http.StatusOK || took > 15*time.Second {
		t.Errorf("the other client's completion: %d after %s", resp.StatusCode, took)
	}
	wg.Wait()
	got := map[int]int{}
	for _, c := range codes {
		got[c]++
	}
	t.Logf("the dripping bodies: %v", got)
	if got[http.StatusRequestTimeout] == 0 {
		t.Errorf("the dripping bodies got %v; want 408 for those that held a slot", got)
	}
	p.alive(t)
}
