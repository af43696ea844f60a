package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pvguard/pvguard/storage"
)

func pvg017SingleDefaultClass() Rule {
	return Rule{
		ID:      "PVG017",
		Name:    "single-default-class",
		Default: ActionWarn,
		Judges:  JudgesState,
		Kinds:   []Kind{KindStorageClass},
		Reads:   []Kind{KindStorageClass},
		Summary: "at most one StorageClass is marked as the cluster default",
		Check: func(r *Review, v View, _ *Config) ([]Finding, error) {
			sc := r.SC
			if sc == nil || !storage.IsDefaultClass(sc) || (r.OldSC != nil && storage.IsDefaultClass(r.OldSC)) {
				return nil, nil
			}
			classes, err := v.StorageClasses()
			if err != nil {
				return nil, fmt.Errorf("listing StorageClasses: %w", err)
			}
			var others []string
			for _, other := range classes {
				if other != nil && other.Name != sc.Name && storage.IsDefaultClass(other) {
					others = append(others, other.Name)
				}
			}
			if len(others) == 0 {
				return nil, nil
			}
			slices.Sort(others)
			key := storage.AnnDefaultClass
			if sc.Annotations[storage.AnnDefaultClass] != "true" {
				key = storage.AnnBetaDefaultClass
			}
			self := ObjectRef{Kind: KindStorageClass, Name: sc.Name}
			names := "StorageClass " + others[0]
			already := names + " is already the default"
			if len(others) > 1 {
				names = "StorageClasses " + strings.Join(others, ", ")
				already = names + " are already default"
			}
			return []Finding{{
				Object: self,
				Field:  fmt.Sprintf("metadata.annotations[%s]", key),
				Message: Textf("%s is being marked default, but %s; claims without a class would get whichever default was created last",
					self, Word(already)),
				Hint:  Textf("remove the is-default-class annotation from %s (or set it to \"false\"), or do not mark %s default", Word(names), self),
				fixes: []Fix{clearing(self, annPath(storage.AnnDefaultClass), annPath(storage.AnnBetaDefaultClass))},
			}}, nil
		},
	}
}
