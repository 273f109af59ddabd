package eval

import (
	"context"
	"testing"
)

func TestDebugReport(t *testing.T) {
	for _, c := range []string{"testdata/packs/support-1.1.0-policy-regression.json", "testdata/packs/support-1.1.0-new-tool.json", baselineFile} {
		rep, err := Test(context.Background(), TestOptions{Pack: readTestFile(t, c), Baseline: readTestFile(t, baselineFile), Golden: goldenDir, AllowUnsigned: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Log(rep.Text())
	}
}
