package testobj

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FailingReader is a client.Reader every read of which fails, naming Source: a reader a test
// holds must never be read (a view's cache, or its apiserver).
type FailingReader struct{ Source string }

func (f FailingReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	return fmt.Errorf("read %T %s from %s", obj, key, f.Source)
}

func (f FailingReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	return fmt.Errorf("listed %T from %s", list, f.Source)
}
