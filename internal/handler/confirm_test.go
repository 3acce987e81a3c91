package handler_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/conveyor/conveyor/internal/aws/bucket"
	"github.com/conveyor/conveyor/internal/handler"
	"github.com/conveyor/conveyor/internal/resources"
	"github.com/conveyor/conveyor/internal/testfactory"
	"github.com/conveyor/conveyor/internal/uploads"
	"github.com/conveyor/conveyor/localstack/awstest"
)

// TestConfirmsTheUploadOfANewObject wires the function as its binary does
// and feeds it the bucket's notification of a new object whose key S3
// URL-encoded: the upload is confirmed; a record of another event is
// ignored.
func TestConfirmsTheUploadOfANewObject(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	env := awstest.Provision(t).Function(t, resources.FuncConfirm, nil)
	h, err := handler.NewConfirm(ctx, env)
	if err != nil {
		t.Fatal(err)
	}
	var img bytes.Buffer
	if err := png.Encode(&img, image.NewRGBA(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	st := env.Store(env.DynamoDB())
	u := testfactory.Upload(t, st, testfactory.UploadOpts{Status: uploads.Pending, Filename: "my pic.png", Size: int64(img.Len())})
	bucketName := env.Config.Bucket
	if _, err := bucket.New(env.AWS, bucketName).Put(ctx, u.Key, bytes.NewReader(img.Bytes()), bucket.Headers{ContentType: "image/png"}); err != nil {
		t.Fatal(err)
	}
	record := func(name, key string) events.S3EventRecord {
		return events.S3EventRecord{EventName: name, S3: events.S3Entity{Bucket: events.S3Bucket{Name: bucketName}, Object: events.S3Object{Key: key}}}
	}
	encoded := strings.ReplaceAll(u.Key, " ", "+")
	if err := h(ctx, events.S3Event{Records: []events.S3EventRecord{record("ObjectRemoved:Delete", encoded)}}); err != nil {
		t.Fatalf("a removal: %v", err)
	}
	if got, err := st.GetUpload(ctx, u.ID); err != nil || got.Status != uploads.Pending {
		t.Fatalf("after a removal the upload is %q (%v), want it still pending", got.Status, err)
	}
	if err := h(ctx, events.S3Event{Records: []events.S3EventRecord{record("ObjectCreated:Put", encoded)}}); err != nil {
		t.Fatal(err)
	}
	if got, err := st.GetUpload(ctx, u.ID); err != nil || got.Status != uploads.Confirmed {
		t.Errorf("the upload is %q (%v), want %q", got.Status, err, uploads.Confirmed)
	}
}
