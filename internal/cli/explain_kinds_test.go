package cli

import (
	"context"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/pvguard/pvguard/clusterstate"
	"github.com/pvguard/pvguard/policy"
)

// TestLocalReadListsOnlyTheReadableKindsItsRulesRead: the local read lists, besides its own
// reads, the kinds of the readable table that the rules judging the pairs read; with the shipped
// rules, which read none, it makes no request at all (the config points nowhere).
func TestLocalReadListsOnlyTheReadableKindsItsRulesRead(t *testing.T) {
	ctx := context.Background()
	nowhere := &rest.Config{Host: "https://127.0.0.1:1"}
	st := clusterstate.New(nil, nil, nil, nil)
	got, err := readKindsLive(ctx, nowhere, st, policy.NewEngine(nil).Reads())
	if err != nil || got != st {
		t.Fatalf("with the shipped rules: %v, %v; want the state as read, no request", got, err)
	}
	_, err = readKindsLive(ctx, nowhere, st, []clusterstate.Kind{"VolumeAttributesClass"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("reading a readable kind from nowhere: %v, want an error naming the server", err)
	}
}
