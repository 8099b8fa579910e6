package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

// readyFDEnv names the environment variable through which a daemon child
// learns the file descriptor of its readiness pipe. It is internal: the
// parent sets it, users do not.
const readyFDEnv = "STALLFS_READY_FD"

// The readiness protocol: the child writes exactly one line to the pipe,
// "ok" once the kernel serves the mount, or "err STATUS MESSAGE" when it
// gives up, and closes it. End of file without a line means the child died.
const readyOK = "ok"

// readyPipe is the child's end of the readiness pipe.
type readyPipe struct {
	f *os.File // nil once a line was written
}

// readyPipeFromEnv returns the readiness pipe when this process is a daemon
// child.
func readyPipeFromEnv(getenv func(string) string) (*readyPipe, bool, error) {
	v := getenv(readyFDEnv)
	if v == "" {
		return nil, false, nil
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, false, fmt.Errorf("internal variable %s=%q is not a file descriptor", readyFDEnv, v)
	}
	f := os.NewFile(uintptr(fd), "stallfs-ready")
	if f == nil {
		return nil, false, fmt.Errorf("internal variable %s=%q is not an open file descriptor", readyFDEnv, v)
	}
	return &readyPipe{f: f}, true, nil
}

// ok reports that the mount is ready.
func (r *readyPipe) ok() { r.write(readyOK) }

// fail reports err (nil: the child stopped without mounting) unless
// readiness was already reported.
func (r *readyPipe) fail(err error) {
	if err == nil {
		err = errors.New("stopped before the mount was ready")
	}
	r.write(fmt.Sprintf("err %d %s", exitCode(err), oneLine(err.Error())))
}

func (r *readyPipe) write(line string) {
	if r.f == nil {
		return
	}
	_, _ = io.WriteString(r.f, line+"\n")
	_ = r.f.Close()
	r.f = nil
}

// startDaemon re-executes this program detached (new session, stdio to the
// log file or /dev/null) with the same arguments, and waits until the
// child reports the mount ready or failed. A failure is relayed with the
// child's message and exit status.
func (a *cliApp) startDaemon(cfg mountConfig) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("daemon: find own executable: %w", err)
	}
	out, err := daemonOutput(cfg.LogFile)
	if err != nil {
		return err
	}
	defer out.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("daemon: %w", err)
	}
	defer r.Close()

	cmd := exec.Command(exe, a.argv[1:]...)
	cmd.Env = append(os.Environ(), readyFDEnv+"=3") // ExtraFiles[0] is fd 3
	cmd.ExtraFiles = []*os.File{w}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("daemon: start: %w", err)
	}
	w.Close() // the child holds the only write end: its death means EOF

	msg, _ := io.ReadAll(r)
	line := strings.TrimSpace(string(msg))
	if line == readyOK {
		return cmd.Process.Release()
	}
	waitErr := cmd.Wait()
	if rest, found := strings.CutPrefix(line, "err "); found {
		codeStr, text, _ := strings.Cut(rest, " ")
		code, convErr := strconv.Atoi(codeStr)
		if convErr != nil || code == 0 {
			code = exitFailure
		}
		return &statusError{code: code, err: errors.New(text)}
	}
	hint := "see --log-file"
	if cfg.LogFile != "" {
		hint = "see " + cfg.LogFile
	}
	return fmt.Errorf("daemon exited before the mount was ready (%v); %s", waitErr, hint)
}

// daemonOutput opens where the daemon's stdout and stderr go.
func daemonOutput(logFile string) (*os.File, error) {
	if logFile == "" {
		return os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	}
	f, err := os.OpenFile(logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, usagef("--log-file %q: %w", logFile, pathErrCause(err))
	}
	return f, nil
}
