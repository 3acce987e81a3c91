package scheduler_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(awstest.Wrap(m)) }
