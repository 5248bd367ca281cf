package roundtrip_test

import (
	"os"
	"testing"

	"github.com/stratadb/strata/harness/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
