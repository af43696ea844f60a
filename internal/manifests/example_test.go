package manifests_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/pvguard/pvguard/internal/manifests"
)

// A directory of manifests, one of which repeats a key: the object that repeats it is named with
// its file, document and field, and everything else is read.
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "manifests-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"claims.json": `{"apiVersion":"v1","kind":"List","items":[
			{"apiVersion":"v1","kind":"PersistentVolumeClaim","metadata":{"name":"db","namespace":"team-a"}}]}`,
		"volumes.yaml": `apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-1}
spec:
  volumeMode: Block
  volumeMode: Filesystem
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-2}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			panic(err)
		}
	}

	st, n, errs := manifests.Load([]string{dir})
	fmt.Println(n, "objects:", st.Claims()[0].Namespace+"/"+st.Claims()[0].Name, st.Volumes()[0].Name)
	for _, err := range errs {
		fmt.Println(strings.TrimPrefix(err.Error(), dir+string(filepath.Separator)))
	}
	// Output:
	// 2 objects: team-a/db pv-2
	// volumes.yaml: document 1: PersistentVolume pv-1: duplicate field "spec.volumeMode"
}
