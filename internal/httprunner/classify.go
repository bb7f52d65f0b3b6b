package httprunner

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// classify maps a failed exchange to an exit code and a message a user can
// act on. parent is the runner's context (cancelled when the pod is asked to
// stop), reqCtx the one carrying timeoutSeconds. The order matters: the
// deadline explains any error that follows it (a DNS lookup or a TLS
// handshake cut short reports its own error, but the cause is the timeout).
func classify(parent, reqCtx context.Context, err error, timeout time.Duration) (int, string) {
	err = unwrapURLError(err)
	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
	)
	switch {
	case parent.Err() != nil:
		return ExitInterrupted, "interrupted before the request completed (the runner was asked to stop)"
	case errors.Is(err, errTooManyRedirects):
		return ExitTooManyRedirects, fmt.Sprintf("stopped after %d redirects: the limit is %d (a redirect loop, or an endpoint that sends to a login page?)", MaxRedirects, MaxRedirects)
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout, fmt.Sprintf("no complete response within %s (timeoutSeconds)", timeout)
	case isCertificateError(err):
		return ExitTLS, "TLS handshake failed: " + err.Error() + " (certificates are always verified, against the system CA certificates)"
	case isTLSError(err):
		return ExitTLS, "TLS handshake failed: " + err.Error()
	case errors.As(err, &dnsErr):
		return ExitConnection, fmt.Sprintf("cannot resolve host %q: %s", dnsErr.Name, dnsErr.Err)
	case isTimeout(err):
		// A transport-level timeout (e.g. an injected client's Timeout).
		return ExitTimeout, "timed out: " + err.Error()
	case errors.Is(err, io.EOF):
		return ExitConnection, "the server closed the connection without sending a response"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return ExitConnection, "the server closed the connection before the response was complete"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return ExitConnection, fmt.Sprintf("cannot connect to %s: %s", opErr.Addr, innermost(opErr))
	case errors.As(err, &opErr), isConnErrno(err):
		return ExitConnection, "connection error: " + err.Error()
	default:
		return ExitRequestFailed, err.Error()
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// isCertificateError recognises a server certificate the runner does not
// trust (unknown CA, wrong host name, expired...), the usual TLS failure.
func isCertificateError(err error) bool {
	var (
		verifyErr    *tls.CertificateVerificationError
		authorityErr x509.UnknownAuthorityError
		hostnameErr  x509.HostnameError
		invalidErr   x509.CertificateInvalidError
		rootsErr     x509.SystemRootsError
	)
	return errors.As(err, &verifyErr) || errors.As(err, &authorityErr) || errors.As(err, &hostnameErr) ||
		errors.As(err, &invalidErr) || errors.As(err, &rootsErr)
}

// isTLSError recognises other handshake failures. Most carry a crypto/tls
// type; an alert sent by the server is only a net.OpError with Op "remote
// error"; and talking TLS to a plain HTTP port gives
// http.ErrSchemeMismatch.
func isTLSError(err error) bool {
	var (
		recordErr tls.RecordHeaderError
		alertErr  tls.AlertError
		echErr    *tls.ECHRejectionError
		opErr     *net.OpError
	)
	switch {
	case errors.As(err, &recordErr), errors.As(err, &alertErr), errors.As(err, &echErr),
		errors.Is(err, http.ErrSchemeMismatch):
		return true
	case errors.As(err, &opErr) && opErr.Op == "remote error":
		return true
	}
	return strings.HasPrefix(err.Error(), "tls: ")
}

// isConnErrno recognises socket errors that reach us without a net.OpError.
func isConnErrno(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED,
		syscall.EPIPE, syscall.ENETUNREACH, syscall.EHOSTUNREACH, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// innermost is the deepest error's text: "connection refused" rather than
// "dial tcp 127.0.0.1:1: connect: connection refused".
func innermost(err error) string {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err.Error()
		}
		err = next
	}
}
