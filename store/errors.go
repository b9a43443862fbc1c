package store

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Sentinel errors. Errors returned by the store wrap one of them (or
// ErrNotFound) where it applies, so callers test with errors.Is.
var (
	// ErrUnavailable: etcd could not be reached or had no leader within the
	// operation timeout. The operation may or may not have been applied;
	// retrying it later is safe for reads and for the store's
	// compare-and-swap transitions.
	ErrUnavailable = errors.New("store: etcd unavailable (retryable)")
	// ErrConflict: a compare-and-swap lost against concurrent writers more
	// often than the retry budget allows, or a caller-supplied expectation
	// (such as the cursor an advance starts from) no longer holds. Nothing
	// was written. Re-read and retry.
	ErrConflict = errors.New("store: concurrent update")
	// ErrIllegalTransition: the requested status change (or operation) is
	// not allowed from the entity's current status. See TransitionError.
	ErrIllegalTransition = errors.New("store: illegal status transition")
	// ErrBufferFull: a stream session's item buffer has no room for the
	// item. See BufferFullError.
	ErrBufferFull = errors.New("store: session item buffer full")
	// ErrTooLarge: a value does not fit in one etcd request.
	ErrTooLarge = errors.New("store: value too large")
	// ErrNotOwner: a runner operation came from a replica that does not
	// (or no longer) own the entity — e.g. after its owner lease expired
	// and the entity was marked failed or adopted elsewhere.
	ErrNotOwner = errors.New("store: not the owner")
	// ErrInvalid: an argument is malformed or out of range; the error
	// names the field.
	ErrInvalid = errors.New("store: invalid argument")
	// ErrNoSpace: etcd's database reached its space quota and etcd raised
	// its NOSPACE alarm, so it refuses every write (and lease grant) until
	// space is freed and the alarm is disarmed (see RecoverSpace); reads
	// and deletes still work. Nothing was written. It is not Retryable: it
	// lasts until the store recovers, which takes compaction, defragmenting
	// and disarming, not a quick retry. See NoSpaceError.
	ErrNoSpace = errors.New("store: etcd is out of space (NOSPACE alarm)")
)

// Retryable reports whether err is a transient store failure worth retrying
// later: etcd unavailable or a lost compare-and-swap race.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, ErrConflict)
}

// UnavailableError reports that etcd could not serve an operation in time.
// It matches ErrUnavailable with errors.Is and unwraps to the cause.
type UnavailableError struct {
	Op  string // what the store was doing, e.g. "poll stream session ss_…"
	Err error  // the cause reported by the etcd client
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("store: %s: etcd unavailable (retryable): %v", e.Op, e.Err)
}

// Is makes errors.Is(err, ErrUnavailable) true.
func (e *UnavailableError) Is(target error) bool { return target == ErrUnavailable }

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// Retryable is always true: the condition is transient.
func (e *UnavailableError) Retryable() bool { return true }

// TooLargeError reports a value larger than the store keeps. It matches
// ErrTooLarge with errors.Is.
type TooLargeError struct {
	What  string // what is too large, e.g. "job job_… result_json"
	Size  int    // its size in bytes
	Limit int    // the most the store keeps, in bytes
	Why   string // what sets the limit
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("store: %s is %d bytes, over the %d-byte limit (%s)", e.What, e.Size, e.Limit, e.Why)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// NoSpaceError reports a write that etcd refused because its database
// reached its space quota (the NOSPACE alarm). It matches ErrNoSpace with
// errors.Is and unwraps to the cause.
type NoSpaceError struct {
	Op  string // what the store was doing
	Err error  // the cause reported by the etcd client
}

func (e *NoSpaceError) Error() string {
	return fmt.Sprintf("store: %s: etcd is out of space (NOSPACE alarm: its database reached its space quota); "+
		"writes are refused until space is freed and the alarm is disarmed: %v", e.Op, e.Err)
}

// Is makes errors.Is(err, ErrNoSpace) true.
func (e *NoSpaceError) Is(target error) bool { return target == ErrNoSpace }

// Unwrap returns the cause.
func (e *NoSpaceError) Unwrap() error { return e.Err }

// TransitionError reports a status change (or an operation) that the
// entity's status machine refuses.
type TransitionError struct {
	Kind string // "stream session" or "job"
	ID   string
	From string // current status
	To   string // requested status, or the refused operation
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("store: %s %s is %s: cannot %s", e.Kind, e.ID, e.From, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// BufferFullError reports that a stream session's item buffer cannot take
// more items until a poll acknowledges some.
type BufferFullError struct {
	ID            string
	MaxItems      int   // the session's max_items
	MaxBytes      int64 // the session's max_bytes
	BufferedItems int   // items buffered now
	BufferedBytes int64 // bytes buffered now
	ItemBytes     int   // size of the first refused item
}

func (e *BufferFullError) Error() string {
	return fmt.Sprintf("store: stream session %s: item buffer full (%d/%d items, %d/%d bytes buffered; next item %d bytes): poll to make room",
		e.ID, e.BufferedItems, e.MaxItems, e.BufferedBytes, e.MaxBytes, e.ItemBytes)
}

// Is makes errors.Is(err, ErrBufferFull) true.
func (e *BufferFullError) Is(target error) bool { return target == ErrBufferFull }

// classify turns an etcd client error into the store's vocabulary: the
// caller's own cancellation stays as is; timeouts of the store's operation
// deadline and gRPC/etcd "unavailable" conditions become UnavailableError;
// a write refused by etcd's NOSPACE alarm becomes NoSpaceError; a too-large
// request becomes ErrTooLarge.
func classify(caller context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	var ue *UnavailableError
	var ne *NoSpaceError
	if errors.As(err, &ue) || errors.As(err, &ne) {
		return err
	}
	if isNoSpace(err) {
		return &NoSpaceError{Op: op, Err: err}
	}
	if caller.Err() != nil {
		return fmt.Errorf("store: %s: %w", op, caller.Err())
	}
	if isUnavailable(err) {
		return &UnavailableError{Op: op, Err: err}
	}
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return fmt.Errorf("store: %s: %w: %v", op, ErrTooLarge, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

// isNoSpace reports an etcd "database space exceeded" refusal.
func isNoSpace(err error) bool {
	return errors.Is(err, rpctypes.ErrNoSpace) || errors.Is(err, rpctypes.ErrGRPCNoSpace)
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true // the store's operation deadline (the caller's is checked first)
	}
	var code codes.Code
	var msg string
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		code = ee.Code()
	} else if s, ok := status.FromError(err); ok {
		code, msg = s.Code(), s.Message()
	} else {
		return false
	}
	switch code {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	case codes.Internal:
		// A member shutting down (over TLS) ends its open streams without
		// trailers; gRPC's transport reports that as Internal with this
		// text, though the request simply did not complete.
		return msg == "server closed the stream without sending trailers"
	case codes.Unknown:
		// A member starting or stopping can answer on its shared TLS port
		// with its plain HTTP handler; gRPC's transport reports the
		// non-gRPC answer as Unknown, and the call never reached etcd.
		return strings.HasPrefix(msg, "unexpected HTTP status code received from server")
	case codes.ResourceExhausted:
		// "too many requests" is transient; "database space exceeded" is not.
		return errors.Is(err, rpctypes.ErrTooManyRequests) || errors.Is(err, rpctypes.ErrGRPCRequestTooManyRequests)
	}
	return false
}
