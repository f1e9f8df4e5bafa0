package rawsock

import (
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// echoEnv makes this test binary the answering server of
// BenchmarkIdleRoundTrip, on the socket it names.
const echoEnv = "RAWSOCK_TEST_ECHO"

func TestMain(m *testing.M) {
	if sock := os.Getenv(echoEnv); sock != "" {
		echo(sock)
		return
	}
	os.Exit(m.Run())
}

// echo answers each 512-byte request on sock after 300 µs of "work".
func echo(sock string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		os.Exit(1)
	}
	_, _ = os.Stdout.WriteString("ready\n")
	c, err := ln.Accept()
	if err != nil {
		os.Exit(1)
	}
	buf := make([]byte, 512)
	for {
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		for t := time.Now(); time.Since(t) < 300*time.Microsecond; {
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
	}
}

// BenchmarkIdleRoundTrip is a client's call to a server in another
// process that takes a while to answer, the client having nothing else
// to run while it waits: what an agent's process calling a server does.
// It reports the client process's CPU and voluntary context switches per
// call, with the net package's reads and writes and with raw ones.
func BenchmarkIdleRoundTrip(b *testing.B) {
	for _, tc := range []struct {
		name string
		wrap func(net.Conn) net.Conn
	}{
		{"net", func(c net.Conn) net.Conn { return c }},
		{"raw", Wrap},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sock := b.TempDir() + "/s.sock"
			self, err := os.Executable()
			if err != nil {
				b.Fatal(err)
			}
			srv := exec.Command(self) // #nosec G204 -- this test binary
			srv.Env = append(os.Environ(), echoEnv+"="+sock)
			out, err := srv.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := srv.Start(); err != nil {
				b.Fatal(err)
			}
			defer func() { _ = srv.Process.Kill(); _ = srv.Wait() }()
			if _, err := out.Read(make([]byte, 6)); err != nil {
				b.Fatal(err)
			}
			c, err := net.Dial("unix", sock)
			if err != nil {
				b.Fatal(err)
			}
			c = tc.wrap(c)
			defer c.Close()
			buf := make([]byte, 512)
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Write(buf); err != nil {
					b.Fatal(err)
				}
				if _, err := io.ReadFull(c, buf); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
			b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
			b.ReportMetric(float64(ru1.Nvcsw-ru0.Nvcsw)/float64(b.N), "ctxsw/op")
		})
	}
}
