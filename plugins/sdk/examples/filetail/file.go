package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/crankmcp/crank/plugins/sdk"
)

// open opens the file and finds where its last n complete lines begin.
func (f *file) open(ctx context.Context, n int) (h *os.File, start, size int64, err error) {
	if h, err = os.Open(f.path); err != nil {
		return nil, 0, 0, err
	}
	fi, err := h.Stat()
	if err == nil {
		size = fi.Size()
		start, err = lastLines(ctx, h, size, n)
	}
	if err != nil {
		h.Close()
		return nil, 0, 0, err
	}
	return h, start, size, nil
}

// lastLines returns the offset at which the last n complete lines of a
// file of the given size begin: after the (n+1)th line end from the end,
// or 0. A line counts once its line end is written.
func lastLines(ctx context.Context, r io.ReaderAt, size int64, n int) (int64, error) {
	buf := make([]byte, 32<<10)
	seen := -1 // line ends seen before the last one
	for end := size; end > 0; {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		start := max(end-int64(len(buf)), 0)
		b := buf[:end-start]
		if _, err := r.ReadAt(b, start); err != nil {
			return 0, err
		}
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] == '\n' {
				if seen++; seen == n {
					return start + int64(i) + 1, nil
				}
			}
		}
		end = start
	}
	return 0, nil
}

// read calls each with every complete line between the offsets off and
// end (without its line end, cut to max_line_bytes) and the offset after
// it. It returns the offset after the last complete line: a line still
// being written is read again once it is complete.
func (f *file) read(ctx context.Context, r io.ReaderAt, off, end int64, each func(line string, next int64) error) (int64, error) {
	br := bufio.NewReader(io.NewSectionReader(r, off, end-off))
	var line []byte
	for pos := off; ; {
		chunk, err := br.ReadSlice('\n')
		pos += int64(len(chunk))
		if room := f.maxLineBytes + len("\r\n") - len(line); room > 0 {
			line = append(line, chunk[:min(room, len(chunk))]...)
		}
		switch {
		case err == nil:
			if err := ctx.Err(); err != nil {
				return off, err
			}
			s := strings.TrimSuffix(strings.TrimSuffix(string(line), "\n"), "\r")
			if err := each(s[:min(len(s), f.maxLineBytes)], pos); err != nil {
				return off, err
			}
			off, line = pos, line[:0]
		case errors.Is(err, bufio.ErrBufferFull): // a long line: read on
		case errors.Is(err, io.EOF):
			return off, nil
		default:
			return off, err
		}
	}
}

// follower is one stream following a file.
type follower struct {
	*file
	h    *os.File
	off  int64 // where the next line begins
	send sdk.StreamSender
}

// look sends the lines completed since the last look. A file at the path
// that is not the open one has replaced it: the rest of the open one is
// sent, then the new one is read from its start. A file shorter than
// where the stream is was truncated: it is read again from its start.
// Either way offsets start over, so the cursors before are meaningless
// after it: that is a gap.
func (w *follower) look(ctx context.Context) error {
	fi, err := w.h.Stat()
	if err != nil {
		return err
	}
	if now, err := os.Stat(w.path); err == nil && !os.SameFile(fi, now) {
		if err := w.sendLines(ctx, fi.Size()); err != nil {
			return err
		}
		if h, err := os.Open(w.path); err == nil {
			w.h.Close()
			w.h, w.off = h, 0
			if err := w.send.Gap("the file was replaced: reading the new one from its start"); err != nil {
				return err
			}
			if fi, err = h.Stat(); err != nil {
				return err
			}
		}
	}
	if fi.Size() < w.off {
		w.off = 0
		if err := w.send.Gap("the file was truncated: reading it again from its start"); err != nil {
			return err
		}
	}
	return w.sendLines(ctx, fi.Size())
}

// sendLines sends the complete lines of the open file up to end.
func (w *follower) sendLines(ctx context.Context, end int64) error {
	off, err := w.read(ctx, w.h, w.off, end, func(line string, next int64) error {
		data, err := json.Marshal(map[string]string{"line": line})
		if err != nil {
			return err
		}
		return w.send.Item(sdk.Item{Data: data, Cursor: strconv.FormatInt(next, 10)})
	})
	w.off = off
	return err
}
