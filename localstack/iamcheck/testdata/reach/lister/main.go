// Command lister is the reachability check's fixture: a function that
// writes an object and, only when the write fails, lists the bucket — an
// error path no scenario takes, so no recording sees it. Under the local
// stack it cleans up through a stand-in the deployed function never runs.
package main

import (
	"context"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func main() {
	ctx := context.Background()
	c := s3.New(s3.Options{Region: "us-east-1"})
	bucket := aws.String("fixture")
	if _, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: bucket, Key: aws.String("k"), Body: strings.NewReader("v")}); err != nil {
		// What is there? Only a caller that may list the bucket is told.
		_, _ = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: bucket})
	}
	if os.Getenv("ENV") == "local" {
		localCleanup(ctx, c)
	}
}

// localCleanup is the local stand-in: the check does not enter it.
func localCleanup(ctx context.Context, c *s3.Client) {
	_, _ = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("fixture"), Key: aws.String("k")})
}
