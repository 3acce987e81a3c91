package stack

import (
	"encoding/json"
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// CDKJSONContext returns the "context" of a cdk.json: the feature flags
// (and any other context) the stacks are written for. infra/cdk.json holds
// the recommended flags of the pinned aws-cdk-lib, as `cdk init` writes
// them; the CLI passes them to the app when it runs in infra/, and the app
// and the tests read the same file (NewApp), so every synthesis, with or
// without the CLI, makes the templates `cdk deploy` deploys.
func CDKJSONContext(cdkJSON []byte) (map[string]any, error) {
	var doc struct {
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(cdkJSON, &doc); err != nil {
		return nil, fmt.Errorf("reading cdk.json: %w", err)
	}
	if len(doc.Context) == 0 {
		return nil, fmt.Errorf("cdk.json has no context (feature flags)")
	}
	return doc.Context, nil
}

// NewApp returns a CDK app with context (from CDKJSONContext; context given
// on the command line still wins) and outdir as its output directory (""
// for CDK's default: the CLI's, or a temporary directory).
func NewApp(outdir string, context map[string]any) awscdk.App {
	ctx := map[string]interface{}{}
	for k, v := range context {
		ctx[k] = v
	}
	props := &awscdk.AppProps{Context: &ctx}
	if outdir != "" {
		props.Outdir = jsii.String(outdir)
	}
	return awscdk.NewApp(props)
}
