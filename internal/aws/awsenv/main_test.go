package awsenv_test

import (
	"testing"

	"github.com/conveyor/conveyor/localstack/awstest"
)

func TestMain(m *testing.M) { awstest.Main(m) }
