// Command hello is the aws-lambda-go hello world the bench compares the
// functions' cold starts with: built with the same flags, it shows what the
// runtime itself costs before a function's own initialisation.
package main

import "github.com/aws/aws-lambda-go/lambda"

func main() {
	lambda.Start(func() (string, error) { return "hello", nil })
}
