package uploads_test

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/conveyor/conveyor/internal/aws/awsclient"
	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/aws/store"
	"github.com/conveyor/conveyor/internal/clock"
	"github.com/conveyor/conveyor/internal/invalid"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }

const maxSize = 1 << 20

type testBundle struct {
	svc     *uploads.Service
	st      *store.Store
	objects *bucket.Bucket
	bucket  string
	clk     *clock.Simulated
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	env := awstest.Provision(t)
	clk := clock.NewSimulated(time.Now())
	b := &testBundle{
		st:      store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, clk.Now),
		objects: bucket.New(env.Config, env.Res.Definition.Bucket.Name),
		bucket:  env.Res.Definition.Bucket.Name,
		clk:     clk,
	}
	b.svc = uploads.New(uploads.Config{
		Store: b.st, Objects: b.objects,
		Prefix: "uploads/", MaxSize: maxSize, Expiry: 5 * time.Minute, Now: clk.Now,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	return b
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// put writes body at key with contentType, as the browser's PUT would.
func (b *testBundle) put(t *testing.T, key, contentType string, body []byte) {
	t.Helper()
	if _, err := b.objects.Put(context.Background(), key, bytes.NewReader(body), bucket.Headers{ContentType: contentType}); err != nil {
		t.Fatalf("putting %s: %v", key, err)
	}
}

func TestSignRefusesBadRequestsByField(t *testing.T) {
	t.Parallel()
	b := setup(t)
	long := string(bytes.Repeat([]byte("a"), 256))
	for _, tc := range []struct {
		name  string
		req   uploads.SignRequest
		field string
	}{
		{"no filename", uploads.SignRequest{Filename: " ", ContentType: "image/png", Size: 10}, "filename"},
		{"long filename", uploads.SignRequest{Filename: long, ContentType: "image/png", Size: 10}, "filename"},
		{"type not allowed", uploads.SignRequest{Filename: "a.svg", ContentType: "image/svg+xml", Size: 10}, "contentType"},
		{"empty", uploads.SignRequest{Filename: "a.png", ContentType: "image/png", Size: 0}, "size"},
		{"too large", uploads.SignRequest{Filename: "a.png", ContentType: "image/png", Size: maxSize + 1}, "size"},
	} {
		_, err := b.svc.Sign(context.Background(), "u-1", tc.req)
		var ve *invalid.FieldError
		if !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%s: err = %v, want an invalid.FieldError on %s", tc.name, err, tc.field)
		}
	}
}

// TestSignBindsTypeSizeAndExpiry checks what is signed — moto checks
// neither signature nor expiry, so the test reads the URL and headers.
func TestSignBindsTypeSizeAndExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	s, err := b.svc.Sign(ctx, owner, uploads.SignRequest{Filename: "../etc/My Photo.png", ContentType: "image/png", Size: 1234})
	if err != nil {
		t.Fatal(err)
	}
	if want := "uploads/" + owner + "/" + s.UploadID + "/My Photo.png"; s.Key != want {
		t.Errorf("key = %q, want %q", s.Key, want)
	}
	if s.Method != http.MethodPut || s.Headers["Content-Type"] != "image/png" || s.Headers["Content-Length"] != "1234" {
		t.Errorf("method %s headers %v", s.Method, s.Headers)
	}
	if want := b.clk.Now().Add(5 * time.Minute); !s.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt = %v, want %v", s.ExpiresAt, want)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if q.Get("X-Amz-Expires") != "300" {
		t.Errorf("X-Amz-Expires = %q, want 300", q.Get("X-Amz-Expires"))
	}
	signed := q.Get("X-Amz-SignedHeaders")
	for _, h := range []string{"content-type", "content-length", "host"} {
		if !bytes.Contains([]byte(signed), []byte(h)) {
			t.Errorf("%s is not signed: %q", h, signed)
		}
	}
	got, err := b.st.GetUpload(ctx, s.UploadID)
	if err != nil || got.Status != uploads.Pending || got.Owner != owner || got.Size != 1234 {
		t.Errorf("stored upload %+v, %v", got, err)
	}
}

func TestConfirmChecksTheObject(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	img := pngBytes(t)
	sign := func(owner string, size int) uploads.Signed {
		t.Helper()
		s, err := b.svc.Sign(ctx, owner, uploads.SignRequest{Filename: "a.png", ContentType: "image/png", Size: int64(size)})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	owner := testfactory.Owner()

	t.Run("not there yet, then confirmed, then idempotent", func(t *testing.T) {
		s := sign(owner, len(img))
		if _, err := b.svc.Confirm(ctx, owner, s.UploadID); !errors.Is(err, uploads.ErrNotUploaded) {
			t.Fatalf("before the PUT: err = %v, want ErrNotUploaded", err)
		}
		b.put(t, s.Key, "image/png", img)
		for range 2 {
			u, err := b.svc.Confirm(ctx, owner, s.UploadID)
			if err != nil || u.Status != uploads.Confirmed {
				t.Fatalf("confirm: %s, %v", u.Status, err)
			}
		}
		// The S3 event for the same object: the same answer.
		if u, err := b.svc.ObjectCreated(ctx, b.bucket, s.Key); err != nil || u.Status != uploads.Confirmed {
			t.Fatalf("event after confirm: %s, %v", u.Status, err)
		}
	})
	t.Run("someone else's upload is not found", func(t *testing.T) {
		s := sign(owner, len(img))
		if _, err := b.svc.Confirm(ctx, "u-intruder", s.UploadID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("err = %v, want ErrNotFound", err)
		}
		if _, err := b.svc.Get(ctx, owner, "not-an-id"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("malformed id: err = %v, want ErrNotFound", err)
		}
	})
	for _, tc := range []struct {
		name, contentType string
		body              []byte
		declared          int
	}{
		{"wrong size", "image/png", img, len(img) + 1},
		{"wrong content type", "image/jpeg", img, len(img)},
		{"not an image", "image/png", bytes.Repeat([]byte("x"), len(img)), len(img)},
		{"empty", "image/png", nil, len(img)},
		{"larger than the bytes read to sniff", "image/png", append(append([]byte{}, img...), make([]byte, 2048)...), len(img)},
	} {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			s := sign(owner, tc.declared)
			b.put(t, s.Key, tc.contentType, tc.body)
			u, err := b.svc.ObjectCreated(ctx, b.bucket, s.Key)
			if err != nil || u.Status != uploads.Rejected || u.Reason == "" {
				t.Errorf("status %s reason %q err %v, want rejected with a reason", u.Status, u.Reason, err)
			}
		})
	}
}

// A confirm reads S3 once: one ranged GET gives the object's length,
// type and ETag and the bytes to sniff; a settled upload is not read
// again.
func TestConfirmReadsTheObjectOnce(t *testing.T) {
	t.Parallel()
	env := awstest.Provision(t)
	counter := awsclient.NewCounter()
	objects := bucket.New(counter.Attach(env.Config.Copy()), env.Res.Definition.Bucket.Name)
	st := store.New(env.Clients.DynamoDB, env.Res.Definition.Table.Name, time.Now)
	svc := uploads.New(uploads.Config{Store: st, Objects: objects, Prefix: "uploads/", MaxSize: maxSize, Expiry: 5 * time.Minute,
		Now: time.Now, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	ctx := context.Background()
	img := pngBytes(t)
	owner := testfactory.Owner()
	s, err := svc.Sign(ctx, owner, uploads.SignRequest{Filename: "a.png", ContentType: "image/png", Size: int64(len(img))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.New(env.Config, env.Res.Definition.Bucket.Name).Put(ctx, s.Key, bytes.NewReader(img), bucket.Headers{ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	counter.Reset()
	if u, err := svc.ObjectCreated(ctx, env.Res.Definition.Bucket.Name, s.Key); err != nil || u.Status != uploads.Confirmed || u.Pin.ETag == "" {
		t.Fatalf("the S3 event's confirm: %s %+v, %v; want confirmed and pinned", u.Status, u.Pin, err)
	}
	if _, err := svc.Confirm(ctx, owner, s.UploadID); err != nil {
		t.Fatal(err)
	}
	if got := counter.Snapshot(); got["S3.GetObject"] != 1 || got["S3.HeadObject"] != 0 {
		t.Errorf("S3 requests of two confirms %v, want one GetObject", got)
	}
}

func TestObjectCreatedIgnoresWhatIsNoSlot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	s, err := b.svc.Sign(ctx, owner, uploads.SignRequest{Filename: "a.png", ContentType: "image/png", Size: 10})
	if err != nil {
		t.Fatal(err)
	}
	for name, ev := range map[string][2]string{
		"another bucket":  {"other-bucket", s.Key},
		"outside slots":   {b.bucket, "exports/report.csv"},
		"malformed id":    {b.bucket, "uploads/" + owner + "/nope/a.png"},
		"unknown upload":  {b.bucket, "uploads/" + owner + "/upl_aaaaaaaaaaaaaaaaaaaaaaaaaa/a.png"},
		"too deep a path": {b.bucket, s.Key + "/x"},
	} {
		u, err := b.svc.ObjectCreated(ctx, ev[0], ev[1])
		if err != nil || u.ID != "" {
			t.Errorf("%s: upload %+v, err %v; want it ignored", name, u, err)
		}
	}
	// A write into the slot path under another user's name: rejected.
	intruder := "uploads/u-intruder/" + s.UploadID + "/a.png"
	b.put(t, intruder, "image/png", pngBytes(t))
	u, err := b.svc.ObjectCreated(ctx, b.bucket, intruder)
	if err != nil || u.Status != uploads.Rejected {
		t.Errorf("intruder's key: %s, %v; want rejected", u.Status, err)
	}
	if got, _ := b.st.GetUpload(ctx, s.UploadID); got.Status != uploads.Rejected {
		t.Errorf("stored status %s, want rejected", got.Status)
	}
}

// TestSanitizeFilename: a name keeps its letters, digits, symbols and safe
// punctuation in every script, NFC-normalised; directories, "..",
// controls, bidirectional and other format characters, slash look-alikes
// and unsafe ASCII punctuation do not survive.
func TestSanitizeFilename(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"photo.png", "photo.png"},
		{"кот 🐱 ñ.png", "кот 🐱 ñ.png"},
		{"кот 🐱 n\u0303.png", "кот 🐱 ñ.png"}, // decomposed ñ: NFC
		{"Cafe\u0301 e\u0301te\u0301.jpg", "Café été.jpg"},
		{"猫の写真（１）.webp", "猫の写真（１）.webp"},
		{"قطة.png", "قطة.png"},
		{"👩\u200d💻 at work.gif", "👩\u200d💻 at work.gif"},
		{"../../etc/passwd", "passwd"},
		{`C:\Users\me\pic.jpg`, "pic.jpg"},
		{"a b&c.png", "a b&c.png"},
		{"My Photo?.jpg", "My Photo_.jpg"},
		{`a"b<c>d|e*f:g%h#i+j.png`, "a_b_c_d_e_f_g_h_i_j.png"},
		{"...", "file"},
		{"", "file"},
		{"x..y.png", "x.y.png"},
		{"tab\there.png", "tab here.png"},
		{"  lots   of\u00a0\u3000space  .png", "lots of space .png"},
		{"nul\x00.png", "nul.png"},
		{"esc\x1b[31m.png", "esc_31m.png"},
		{"c1\u0085\u009b.png", "c1.png"},
		{"cat\u202egnp.exe", "catgnp.exe"},
		{"\u2066iso\u2069\u200e\u200f\u061c.png", "iso.png"},
		{"zero\u200bwidth\ufeff.png", "zerowidth.png"},
		{"a\u2215b\uff0fc\u2044d.png", "a_b_c_d.png"},
		{"private\ue000.png", "private.png"},
		{"bad\xffutf8.png", "badutf8.png"},
		{"ünï.png", "ünï.png"},
	} {
		if got := uploads.SanitizeFilename(tc.in); got != tc.want {
			t.Errorf("SanitizeFilename(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("a", 300) + ".png"
	if got := uploads.SanitizeFilename(long); len(got) != uploads.MaxFilenameBytes || !strings.HasSuffix(got, "a.png") {
		t.Errorf("a 304-byte name became %q (%d bytes), want %d bytes ending in .png", got, len(got), uploads.MaxFilenameBytes)
	}
	// Cut on a character, never inside one.
	wide := strings.Repeat("кот", 40) + ".png"
	if got := uploads.SanitizeFilename(wide); len(got) > uploads.MaxFilenameBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, ".png") {
		t.Errorf("a long Cyrillic name became %q (%d bytes)", got, len(got))
	}
}

// TestContentDisposition: the name in UTF-8 as RFC 8187 filename*, and an
// ASCII filename beside it; the value itself is ASCII.
func TestContentDisposition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"photo.png", `attachment; filename="photo.png"; filename*=UTF-8''photo.png`},
		{"кот 🐱 ñ.png", `attachment; filename="n.png"; filename*=UTF-8''%D0%BA%D0%BE%D1%82%20%F0%9F%90%B1%20%C3%B1.png`},
		{"Café été.jpg", `attachment; filename="Cafe ete.jpg"; filename*=UTF-8''Caf%C3%A9%20%C3%A9t%C3%A9.jpg`},
		{"猫.webp", `attachment; filename="file.webp"; filename*=UTF-8''%E7%8C%AB.webp`},
		{"it's (1).png", `attachment; filename="it's (1).png"; filename*=UTF-8''it%27s%20%281%29.png`},
	} {
		got := uploads.ContentDisposition(tc.in)
		if got != tc.want {
			t.Errorf("ContentDisposition(%q) =\n  %s\nwant\n  %s", tc.in, got, tc.want)
		}
		for _, c := range []byte(got) {
			if c < 0x20 || c >= 0x7f {
				t.Errorf("ContentDisposition(%q) has a byte 0x%02x outside printable ASCII", tc.in, c)
			}
		}
		if strings.Contains(got, "  ") {
			t.Errorf("ContentDisposition(%q) has a double space (SigV4 would fold it)", tc.in)
		}
	}
}

// TestUnicodeNameReachesS3: a name in any script keeps its letters in the
// key, and the object that the presigned PUT (with exactly the headers
// Sign lists) stores carries its Content-Disposition; the S3 event of that
// key confirms the upload.
func TestUnicodeNameReachesS3(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	owner := testfactory.Owner()
	img := pngBytes(t)
	s, err := b.svc.Sign(ctx, owner, uploads.SignRequest{Filename: "кот 🐱 n\u0303.png", ContentType: "image/png", Size: int64(len(img))})
	if err != nil {
		t.Fatal(err)
	}
	if want := "uploads/" + owner + "/" + s.UploadID + "/кот 🐱 ñ.png"; s.Key != want {
		t.Errorf("key = %q, want %q", s.Key, want)
	}
	wantCD := uploads.ContentDisposition("кот 🐱 ñ.png")
	if s.Headers["Content-Disposition"] != wantCD {
		t.Errorf("headers to send = %v, want Content-Disposition %q", s.Headers, wantCD)
	}
	u, err := url.Parse(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if signed := strings.Split(u.Query().Get("X-Amz-SignedHeaders"), ";"); !slices.Contains(signed, "content-disposition") {
		t.Errorf("Content-Disposition is not signed: %v", signed)
	}
	req, err := http.NewRequestWithContext(ctx, s.Method, s.URL, bytes.NewReader(img))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range s.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("presigned PUT: %d", resp.StatusCode)
	}
	head, err := b.objects.Head(ctx, s.Key)
	if err != nil {
		t.Fatal(err)
	}
	if got := head.ContentDisposition; got != wantCD {
		t.Errorf("the object's Content-Disposition = %q, want %q", got, wantCD)
	}
	// S3 events carry the key form-encoded.
	up, err := b.svc.ObjectCreated(ctx, b.bucket, s.Key)
	if err != nil || up.Status != uploads.Confirmed || up.Filename != "кот 🐱 ñ.png" {
		t.Errorf("after the event: %+v, %v", up, err)
	}
}
