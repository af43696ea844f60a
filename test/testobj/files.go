package testobj

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFiles writes files (slash-separated path relative to the directory -> content) into a new
// temporary directory of the test, creating subdirectories as needed, and returns the directory.
func WriteFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
