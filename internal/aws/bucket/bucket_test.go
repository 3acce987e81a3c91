package bucket_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/localstack/awstest"
	"github.com/conveyor/conveyor/localstack/emulator"
)

type testBundle struct {
	cfg  aws.Config
	name string
	b    *bucket.Bucket
}

// setup creates a bucket of the test's own on the emulator.
func setup(t *testing.T) *testBundle {
	t.Helper()
	cfg := awstest.Config(t)
	name := awstest.Name(t, "media")
	if _, err := emulator.S3(cfg).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
	return &testBundle{cfg: cfg, name: name, b: bucket.New(cfg, name)}
}

func (tb *testBundle) put(t *testing.T, key string, body []byte) bucket.Object {
	t.Helper()
	obj, err := tb.b.Put(context.Background(), key, bytes.NewReader(body), bucket.Headers{ContentType: "image/png"})
	if err != nil {
		t.Fatalf("putting %s: %v", key, err)
	}
	return obj
}

// TestPresignPutBindsTheHeaders: the URL signs the type, the size and the
// disposition with the host, for the expiry asked; a PUT that sends the
// signed headers as they are stores the object with them.
func TestPresignPutBindsTheHeaders(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	const key = "uploads/u-1/upl_1/a b.png"
	body := []byte("\x89PNG\r\n\x1a\n....")
	h := bucket.Headers{ContentType: "image/png", ContentLength: int64(len(body)), ContentDisposition: `attachment; filename="a b.png"`}
	p, err := tb.b.PresignPut(ctx, key, h, 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if p.Method != http.MethodPut || q.Get("X-Amz-Expires") != "180" {
		t.Errorf("presigned %s with X-Amz-Expires %q, want PUT and 180", p.Method, q.Get("X-Amz-Expires"))
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	for _, name := range []string{"content-disposition", "content-length", "content-type", "host"} {
		if !slices.Contains(signed, name) {
			t.Errorf("X-Amz-SignedHeaders = %v, lacks %s", signed, name)
		}
		if p.SignedHeader.Get(name) == "" {
			t.Errorf("SignedHeader = %v, lacks %s", p.SignedHeader, name)
		}
	}
	if got := p.SignedHeader.Get("Content-Length"); got != strconv.Itoa(len(body)) {
		t.Errorf("signed Content-Length = %q, want %d", got, len(body))
	}

	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, vals := range p.SignedHeader {
		if !strings.EqualFold(name, "host") {
			req.Header.Set(name, vals[0])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %s", resp.Status)
	}
	head, err := tb.b.Head(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if head.Size != int64(len(body)) || head.ContentType != h.ContentType || head.ContentDisposition != h.ContentDisposition || head.ETag == "" {
		t.Errorf("head = %+v, want the PUT's size, type and disposition and an ETag", head)
	}
}

// TestMissingObjectIsErrNotFound: HEAD (NotFound), GET (NoSuchKey) and a
// GET in a bucket that is not there (NoSuchBucket) are all ErrNotFound,
// and stay the SDK's errors with the SDK's text.
func TestMissingObjectIsErrNotFound(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()

	_, err := tb.b.Head(ctx, "uploads/nobody/none.png")
	var nf *s3types.NotFound
	if !errors.Is(err, bucket.ErrNotFound) || !errors.As(err, &nf) || errors.Is(err, bucket.ErrPreconditionFailed) {
		t.Errorf("Head of a missing key: %v, want ErrNotFound and the SDK's NotFound", err)
	}
	if err != nil && strings.HasPrefix(err.Error(), bucket.ErrNotFound.Error()) {
		t.Errorf("Head's error text %q is not the SDK's", err)
	}

	body, _, err := tb.b.Get(ctx, "uploads/nobody/none.png", bucket.GetOptions{})
	var nsk *s3types.NoSuchKey
	if body != nil || !errors.Is(err, bucket.ErrNotFound) || !errors.As(err, &nsk) {
		t.Errorf("Get of a missing key: %v, want ErrNotFound and the SDK's NoSuchKey", err)
	}

	_, _, err = bucket.New(tb.cfg, tb.name+"-gone").Get(ctx, "k", bucket.GetOptions{})
	if !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Get in a missing bucket: %v, want ErrNotFound (a 404)", err)
	}
}

// TestGetStreamsTheObjectIfMatchNames: a GET naming the object's ETag
// streams it, one naming another ETag is ErrPreconditionFailed, and a
// range reads only its bytes.
func TestGetStreamsTheObjectIfMatchNames(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	data := bytes.Repeat([]byte("0123456789"), 100)
	put := tb.put(t, "uploads/u/k.png", data)

	body, obj, err := tb.b.Get(ctx, "uploads/u/k.png", bucket.GetOptions{IfMatch: put.ETag})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(body)
	body.Close()
	if err != nil || !bytes.Equal(got, data) || obj.ETag != put.ETag || obj.Size != int64(len(data)) || obj.ContentType != "image/png" {
		t.Errorf("Get = %d bytes, %+v, %v; want the %d bytes put with ETag %s", len(got), obj, err, len(data), put.ETag)
	}

	_, _, err = tb.b.Get(ctx, "uploads/u/k.png", bucket.GetOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`})
	if !errors.Is(err, bucket.ErrPreconditionFailed) || errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Get of another ETag: %v, want ErrPreconditionFailed", err)
	}

	body, obj, err = tb.b.Get(ctx, "uploads/u/k.png", bucket.GetOptions{IfMatch: put.ETag, Range: "bytes=0-3"})
	if err != nil {
		t.Fatal(err)
	}
	got, err = io.ReadAll(body)
	body.Close()
	if err != nil || string(got) != "0123" || obj.Size != 4 || obj.Length != int64(len(data)) {
		t.Errorf("ranged Get = %q (size %d of %d), %v; want 0123 of the %d bytes", got, obj.Size, obj.Length, err, len(data))
	}

	// A range past an empty object's end is refused, not an empty body.
	tb.put(t, "uploads/u/empty.png", nil)
	if _, _, err := tb.b.Get(ctx, "uploads/u/empty.png", bucket.GetOptions{Range: "bytes=0-511"}); !errors.Is(err, bucket.ErrRangeNotSatisfiable) {
		t.Errorf("ranged Get of an empty object: %v, want ErrRangeNotSatisfiable", err)
	}
}

// TestDeleteRemovesTheObject: deleted, the object is gone; deleting it
// again is no error.
func TestDeleteRemovesTheObject(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	tb.put(t, "uploads/u/d.png", []byte("png"))
	if err := tb.b.Delete(ctx, "uploads/u/d.png"); err != nil {
		t.Fatal(err)
	}
	if _, err := tb.b.Head(ctx, "uploads/u/d.png"); !errors.Is(err, bucket.ErrNotFound) {
		t.Errorf("Head after Delete: %v, want ErrNotFound", err)
	}
	if err := tb.b.Delete(ctx, "uploads/u/d.png"); err != nil {
		t.Errorf("deleting a missing object: %v", err)
	}
}

// TestAddressingFollowsTheEndpoint: with an endpoint of its own (as the
// emulators') the bucket is addressed by path, unless PathStyle(false)
// says otherwise; its name is the one it was made with. Signing needs no
// network: the endpoint is a name (an IP address is always by path).
func TestAddressingFollowsTheEndpoint(t *testing.T) {
	t.Parallel()
	cfg := awsclient.ForEndpoint(awsclient.Endpoints{Default: "http://s3.example.test"}, "")
	ctx := context.Background()
	h := bucket.Headers{ContentType: "image/png", ContentLength: 1}
	byPath, err := bucket.New(cfg, "media").PresignPut(ctx, "k", h, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(byPath.URL); u == nil || u.Path != "/media/k" {
		t.Errorf("URL %s, want the path /media/k", byPath.URL)
	}
	vhost := bucket.New(cfg, "media", bucket.PathStyle(false))
	byHost, err := vhost.PresignPut(ctx, "k", h, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if u, _ := url.Parse(byHost.URL); u == nil || u.Host != "media.s3.example.test" || u.Path != "/k" {
		t.Errorf("URL %s, want the host media.s3.example.test and the path /k", byHost.URL)
	}
	if vhost.Name() != "media" {
		t.Errorf("Name = %q", vhost.Name())
	}
}
