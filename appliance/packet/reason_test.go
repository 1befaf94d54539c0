package packet

import "testing"

// A reason registered as expected says why; others say nothing.
func TestExpectedReason(t *testing.T) {
	r := Expected(RegisterReason("test_expected"), "the test wants it")
	if got, ok := ReasonNamed("test_expected"); !ok || got != r || got.ExpectedWhy() != "the test wants it" {
		t.Errorf("ReasonNamed: %v %v %q", got, ok, got.ExpectedWhy())
	}
	if ReasonMalformed.ExpectedWhy() != "" {
		t.Error("malformed is expected")
	}
	if _, ok := ReasonNamed("no_such_reason"); ok {
		t.Error("an unregistered name found")
	}
}
