package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partnergiving/giving/eventlog"
)

// ---- The binary ----

// Tests that run the real binary share one build, removed when the tests end.
var (
	buildOnce sync.Once
	binDir    string
	binPath   string
	buildErr  error
)

// givingBinary builds cmd/giving once per test run. -short, the inner loop,
// leaves out the tests that run it: building it alone takes longer than
// the rest of -short.
func givingBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the giving binary, which -short leaves out")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "giving-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "giving")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/partnergiving/giving/cmd/giving").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// cleanEnv is the test's environment without GIVING_* variables, plus env.
func cleanEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIVING_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}

// cliResult is a finished CLI run.
type cliResult struct {
	Stdout, Stderr string
	Code           int
}

// runCLI runs the binary to completion with args and extra environment.
func runCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, givingBinary(t), args...)
	cmd.Env = cleanEnv(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := cliResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("giving %s: %v", strings.Join(args, " "), err)
	}
	return res
}

// server is a running "giving serve" process, or another long-running
// command (launchCommand).
type server struct {
	cmd    *exec.Cmd
	URL    string
	NATS   string // the --nats-listen address operator commands use
	Dir    string // the data directory, which holds the NATS token
	Stdout *syncBuffer
	Stderr *syncBuffer
	done   chan struct{}
	err    error
}

// startServer runs "giving serve" on dataDir with loopback listeners on
// random ports and waits until it prints its addresses.
func startServer(t *testing.T, dataDir string, env []string, args ...string) *server {
	t.Helper()
	s := launchServe(t, env, append([]string{"--data", dataDir, "--addr", "127.0.0.1:0", "--nats-listen", "127.0.0.1:0"}, args...)...)
	s.Dir = dataDir
	s.waitPrinted(t, "its NATS address", func(line string) bool {
		// The token never shows: "nats://xxxxx@127.0.0.1:port (token in ...)".
		_, url, ok := strings.Cut(line, "embedded NATS for operator commands: nats://xxxxx@")
		s.NATS, _, _ = strings.Cut(url, " ")
		return ok
	})
	return s
}

// launchServe runs "giving serve" with args alone and waits until it prints
// the address it serves at.
func launchServe(t *testing.T, env []string, args ...string) *server {
	t.Helper()
	return launchServeIn(t, "", env, args...)
}

// launchServeIn is launchServe in the working directory dir ("" for the
// test's own).
func launchServeIn(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	// A random metrics port unless the test says otherwise: the default one
	// is a single port, and several servers run at once.
	s := launchCommand(t, dir, append([]string{"GIVING_METRICS_ADDR=127.0.0.1:0"}, env...), append([]string{"serve"}, args...)...)
	s.waitPrinted(t, "its address", func(line string) bool {
		_, url, ok := strings.Cut(line, " stack listening on ")
		s.URL = strings.TrimSpace(url)
		return ok
	})
	return s
}

// launchCommand runs the binary with args in dir ("" for the test's own),
// collecting its output line by line, and kills it when the test ends.
func launchCommand(t *testing.T, dir string, env []string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(givingBinary(t), args...)
	cmd.Dir = dir
	cmd.Env = cleanEnv(env...)
	s := &server{cmd: cmd, Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, done: make(chan struct{})}
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// done is closed once the process has exited and every line it
	// printed is in Stdout: a test that reads Stdout after a stop sees
	// all of it.
	collected := make(chan struct{})
	go func() {
		s.err = cmd.Wait()
		pw.Close()
		<-collected
		close(s.done)
	}()
	go func() {
		defer close(collected)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			s.Stdout.Write([]byte(sc.Text() + "\n"))
		}
		// A line too long for the scanner ends it: read on, so the
		// process is never stuck writing.
		_, _ = io.Copy(io.Discard, pr)
	}()
	t.Cleanup(func() { s.kill() })
	return s
}

// waitPrinted waits until found accepts a line the server printed, and
// fails the test if the server exits first.
func (s *server) waitPrinted(t *testing.T, what string, found func(line string) bool) {
	t.Helper()
	waitFor(t, time.Minute, "giving "+s.cmd.Args[1]+" to print "+what, func() bool {
		select {
		case <-s.done:
			t.Fatalf("giving %s exited: %v\nstdout: %s\nstderr: %s", s.cmd.Args[1], s.err, s.Stdout, s.Stderr)
		default:
		}
		for _, line := range strings.Split(s.Stdout.String(), "\n") {
			if found(line) {
				return true
			}
		}
		return false
	})
}

// natsURL is the address, with the token, a test connects to the server's
// embedded NATS at.
func (s *server) natsURL(t *testing.T) string {
	t.Helper()
	token, err := eventlog.NATSToken(s.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return "nats://" + token + "@" + s.NATS
}

// kill stops the process at once, as a crash would.
func (s *server) kill() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
}

// terminate sends SIGTERM and returns the exit code.
func (s *server) terminate(t *testing.T) int {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		t.Fatal("giving serve did not stop within a minute of SIGTERM")
	}
	return s.cmd.ProcessState.ExitCode()
}
