package main

// Backend fault injection for the fault tests: a testing aid, not a
// feature. It is switched on by environment variables only (no flag, no
// help text), read when the pipeline is built, and wraps the backend in
// the throttle wrapper like --backend-latency does:
//
//	STALLFS_X_BACKEND_FAULT=SPEC       a throttle.ParseFault spec, e.g. "error count=3"
//	STALLFS_X_BACKEND_FAULT_FILE=FILE  a file holding such a spec, re-read when it changes
//	STALLFS_X_BACKEND_TIMEOUT=DURATION bound of each backend request (a hang then ends in an error)
//
// A daemon child inherits them from the `stallfs mount --daemon` process.

import (
	"time"

	"github.com/stallfs/stallfs/backend/throttle"
)

// Names of the fault injection variables.
const (
	envBackendFault     = "STALLFS_X_BACKEND_FAULT"
	envBackendFaultFile = "STALLFS_X_BACKEND_FAULT_FILE"
	envBackendTimeout   = "STALLFS_X_BACKEND_TIMEOUT"
)

// testFaults is the fault injection asked for by the environment.
type testFaults struct {
	Fault   func(op, path string, off int64) error // nil: none
	Timeout time.Duration                          // 0: none
	Spec    string                                 // for the log: what was asked
}

// on reports whether any fault injection was asked for.
func (f testFaults) on() bool { return f.Fault != nil || f.Timeout > 0 }

// readTestFaults reads the fault injection variables; a malformed one is
// a usage error.
func readTestFaults(getenv func(string) string) (testFaults, error) {
	var f testFaults
	spec, file := getenv(envBackendFault), getenv(envBackendFaultFile)
	switch {
	case spec != "" && file != "":
		return f, usagef("%s and %s: give one", envBackendFault, envBackendFaultFile)
	case spec != "":
		fn, err := throttle.ParseFault(spec)
		if err != nil {
			return f, usagef("%s: %w", envBackendFault, err)
		}
		f.Fault, f.Spec = fn, spec
	case file != "":
		f.Fault, f.Spec = throttle.FaultFile(file), "file "+file
	}
	if s := getenv(envBackendTimeout); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return f, usagef("%s=%q: want a positive duration", envBackendTimeout, s)
		}
		f.Timeout = d
	}
	return f, nil
}
