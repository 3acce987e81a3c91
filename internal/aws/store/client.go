package store

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/conveyor/conveyor/internal/aws/awsenv"
)

// Client is the DynamoDB client the table is reached through: the wiring
// makes one per cold start (NewClient) and hands it to the Store and to
// the other readers of the table.
type Client = dynamodb.Client

// NewClient returns a DynamoDB client made from awsCfg; it honours the
// DynamoDB endpoint the settings name (DynamoDB Local) even when
// AWS_ENDPOINT_URL is set.
func NewClient(awsCfg aws.Config) *Client {
	return dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
		if ep, ok := awsenv.DynamoDBEndpoint(awsCfg); ok {
			o.BaseEndpoint = aws.String(ep)
		}
	})
}
