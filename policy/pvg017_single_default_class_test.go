package policy_test

import (
	"errors"
	"testing"

	"github.com/pvguard/pvguard/policy"
	"github.com/pvguard/pvguard/storage"
	"github.com/pvguard/pvguard/test/testobj"
)

func TestPVG017SingleDefaultClass(t *testing.T) {
	standard := testobj.StorageClass("standard", "csi.example.com", testobj.DefaultClass)
	legacy := testobj.StorageClass("legacy", "csi.example.com", testobj.SCMeta(testobj.Annotation(storage.AnnBetaDefaultClass, "true")))
	fast := testobj.StorageClass("fast", "csi.example.com")
	fastDefault := testobj.SCWith(fast, testobj.DefaultClass)
	notDefault := testobj.SCMeta(testobj.Annotation(storage.AnnDefaultClass, "false"))

	runRuleCases(t, "PVG017", []ruleCase{
		{
			name:     "second default class is warned",
			review:   scCreate(admin, fastDefault),
			view:     testobj.NewView(standard),
			want:     []string{"metadata.annotations[storageclass.kubernetes.io/is-default-class]"},
			wantText: `StorageClass fast is being marked default, but StorageClass standard is already the default; claims without a class would get whichever default was created last; remove the is-default-class annotation from StorageClass standard (or set it to "false"), or do not mark StorageClass fast default`,
		},
		{
			name:     "several other defaults are one finding naming them all",
			review:   scCreate(admin, fastDefault),
			view:     testobj.NewView(standard, legacy, testobj.StorageClass("slow", "csi.example.com")),
			want:     []string{"metadata.annotations[storageclass.kubernetes.io/is-default-class]"},
			wantText: "but StorageClasses legacy, standard are already default",
		},
		{
			name:   "marking default with the beta annotation is reported on that annotation",
			review: scCreate(admin, testobj.SCWith(fast, testobj.SCMeta(testobj.Annotation(storage.AnnBetaDefaultClass, "true")))),
			view:   testobj.NewView(standard),
			want:   []string{"metadata.annotations[storageclass.beta.kubernetes.io/is-default-class]"},
		},
		{
			name:   "first default class is allowed",
			review: scCreate(admin, fastDefault),
			view:   testobj.NewView(testobj.StorageClass("slow", "csi.example.com")),
		},
		{
			name:   "other class marked false is not a default",
			review: scCreate(admin, fastDefault),
			view:   testobj.NewView(testobj.StorageClass("standard", "csi.example.com", notDefault)),
		},
		{
			name:   "non-default class is allowed next to a default",
			review: scCreate(admin, fast),
			view:   testobj.NewView(standard),
		},
		{
			name:   "update that makes a class default is judged",
			review: scUpdate(admin, fast, fastDefault),
			view:   testobj.NewView(standard, fast),
			want:   []string{"metadata.annotations[storageclass.kubernetes.io/is-default-class]"},
		},
		{
			name:   "update of a class that was already default is not judged",
			review: scUpdate(admin, fastDefault, testobj.SCWith(fastDefault, testobj.SCMeta(testobj.Label("tier", "gold")))),
			view:   testobj.NewView(standard, fastDefault),
		},
		{
			name:   "moving the default in two steps: unmark the old one, then mark the new one",
			review: scUpdate(admin, fast, fastDefault),
			view:   testobj.NewView(testobj.SCWith(standard, notDefault), fast),
		},
		{
			name:   "the class's own stored version is not another default",
			review: scUpdate(admin, testobj.SCWith(fast, notDefault), fastDefault),
			view:   testobj.NewView(fastDefault),
		},
	})
}

func TestPVG017ViewErrorIsReturned(t *testing.T) {
	view := testobj.NewView()
	view.Err = errors.New("cache not synced")
	r := scCreate(admin, testobj.StorageClass("fast", "csi.example.com", testobj.DefaultClass))
	_, err := policy.NewEngine(onlyRule(t, "PVG017")).Admit(r, view)
	if err == nil || !errors.Is(err, view.Err) {
		t.Fatalf("Admit error = %v, want the view's error wrapped", err)
	}
}
