package e2e

import (
	"net"
	"sync"
	"testing"
)

// freezer is a TCP proxy in front of the API server that can hang: frozen,
// it accepts connections and reads what the client sends but passes no
// byte on in either direction, which is what a client sees of an API
// server whose process is stopped (the kernel completes the handshake and
// buffers the request; nothing answers).
//
// The hang was once made with SIGSTOP on the kube-apiserver process, and in
// CI 7 of 20 reviews were answered from the "stopped" server. A process
// group with no parent in its session is orphaned, and when a member of
// such a group exits while another is stopped, the kernel sends the group
// SIGHUP and SIGCONT (POSIX's orphaned process group rule): most likely a
// CI runner that starts the tests so, with SIGHUP ignored, resumed the
// API server when another process of `go test` exited (it could not be
// made to happen outside CI). A proxy hangs whatever the process group.
type freezer struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	thawed chan struct{} // closed while bytes pass
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

// newFreezer listens on a local port and passes connections to target
// until the test ends.
func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, target: target, thawed: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(f.thawed)
	f.wg.Go(f.accept)
	t.Cleanup(f.close)
	return f
}

// Addr is host:port to dial instead of the API server's.
func (f *freezer) Addr() string { return f.ln.Addr().String() }

// Freeze stops every byte, on open connections and new ones.
func (f *freezer) Freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
		f.thawed = make(chan struct{})
	default:
	}
}

// Thaw lets the held bytes and all later ones pass.
func (f *freezer) Thaw() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
}

// gate returns the channel that is closed while bytes pass.
func (f *freezer) gate() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.thawed
}

// track adds c to the connections closed at the end; false when the
// freezer is already closed.
func (f *freezer) track(c net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil {
		return false
	}
	f.conns[c] = struct{}{}
	return true
}

func (f *freezer) accept() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		if !f.track(c) {
			c.Close()
			return
		}
		f.wg.Go(func() { f.serve(c) })
	}
}

// serve passes one connection on. A frozen freezer does not even dial the
// API server: the client's TLS handshake waits, as on a stopped process.
// A stopped API server refuses the dial, and the client sees its
// connection closed at once.
func (f *freezer) serve(c net.Conn) {
	defer c.Close()
	if !f.wait() {
		return
	}
	up, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	if !f.track(up) {
		up.Close()
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	pass := func(dst, src net.Conn) {
		defer func() { done <- struct{}{} }()
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				if !f.wait() {
					return
				}
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pass(up, c)
	go pass(c, up)
	<-done
}

// wait blocks while frozen; false when the freezer is closed meanwhile.
func (f *freezer) wait() bool {
	for {
		g := f.gate()
		<-g
		f.mu.Lock()
		open, same := f.conns != nil, g == f.thawed
		f.mu.Unlock()
		if !open {
			return false
		}
		// Freeze may have put up a new gate since this one opened.
		if same {
			return true
		}
	}
}

// close stops listening, closes every connection and waits for the
// copies to end.
func (f *freezer) close() {
	f.ln.Close()
	f.mu.Lock()
	conns := f.conns
	f.conns = nil
	select {
	case <-f.thawed:
	default:
		close(f.thawed)
	}
	f.mu.Unlock()
	for c := range conns {
		c.Close()
	}
	f.wg.Wait()
}
