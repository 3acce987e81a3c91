package store

import (
	"bytes"
	"compress/flate"
	_ "embed"
	"io"
	"sync"
)

// jobDict is the preset dictionary of the compressed attributes of job and
// event items (a job item's jobZ, an event item's jobZ and earlierZ): the
// documents of one published job — its write's earlier events, its
// attributes as jobZ holds them and its API view, queued, claimed and
// finished — with placeholder ids and times. DEFLATE then finds a job's
// keys, phases and usual values in the dictionary instead of spelling them
// out: a finished job's attributes compress to about 350 bytes instead of
// 720, its API view to 280 instead of 560. Every stored item compressed with
// it needs it to be read, so it never changes (TestJobDictNeverChanges); a
// better one would be new attributes beside these.
//
//go:embed jobdict.v1
var jobDict []byte

// zWriters reuse the compressors (see gzipWriters); Reset keeps the
// dictionary.
var zWriters = sync.Pool{New: func() any {
	w, err := flate.NewWriterDict(io.Discard, flate.BestCompression, jobDict)
	if err != nil {
		panic(err) // only for an invalid level
	}
	return w
}}

// compressed is b as raw DEFLATE with jobDict.
func compressed(b []byte) ([]byte, error) { return compressWith(&zWriters, b) }

// resetWriter is a compressor a pool reuses (gzip.Writer, flate.Writer).
type resetWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

// compressWith compresses b with a writer of pool.
func compressWith(pool *sync.Pool, b []byte) ([]byte, error) {
	var out bytes.Buffer
	w := pool.Get().(resetWriter)
	defer pool.Put(w)
	w.Reset(&out)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// decompressed reverses compressed.
func decompressed(b []byte) ([]byte, error) {
	r := flate.NewReaderDict(bytes.NewReader(b), jobDict)
	defer r.Close()
	return io.ReadAll(r)
}
