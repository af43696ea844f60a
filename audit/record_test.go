package audit

import (
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/test/gen"
)

// TestRecordEachInTurns: recordEach calls its turn around each block of objects, as the audit
// does, and records the same rows with turns as without.
func TestRecordEachInTurns(t *testing.T) {
	st := gen.Inventory(3000)
	each, err := policy.NewEngine(nil).AuditEach(st, policy.AuditOptions{Now: gen.InventoryNow})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := recordEach(each, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	var turns, given atomic.Int64
	turned, err := recordEach(each, st, func() func() {
		turns.Add(1)
		return func() { given.Add(1) }
	})
	if err != nil {
		t.Fatal(err)
	}
	if blocks := int64((len(each) + recordBlock - 1) / recordBlock); turns.Load() < blocks || given.Load() != turns.Load() {
		t.Errorf("%d turns taken and %d given for %d blocks", turns.Load(), given.Load(), blocks)
	}
	if !reflect.DeepEqual(turned, plain) {
		t.Errorf("the rows recorded in turns differ from those without")
	}
}
