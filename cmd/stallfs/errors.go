package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // a runtime failure after the input was accepted
	exitUsage   = 2 // bad input: nothing was mounted
)

// usageError marks bad input; it exits with status 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef formats a usage error; %w wraps as with fmt.Errorf.
func usagef(format string, a ...any) error {
	return &usageError{err: fmt.Errorf(format, a...)}
}

// statusError carries an explicit exit status, such as the one a daemon
// child reported.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// exitCode maps an error returned by a command to the process status.
func exitCode(err error) int {
	var se *statusError
	var ue *usageError
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ec):
		return ec.ExitCode()
	default:
		return exitFailure
	}
}
