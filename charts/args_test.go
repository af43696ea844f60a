package charts

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestContainerArgs(t *testing.T) {
	limit := corev1.EnvVar{Name: "LIMIT", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory"}}}
	ns := corev1.EnvVar{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}}
	for _, tc := range []struct {
		name    string
		c       corev1.Container
		want    []string
		wantErr bool
	}{
		{name: "no references", c: corev1.Container{Args: []string{"serve", "--x=1"}}, want: []string{"serve", "--x=1"}},
		{name: "literal", c: corev1.Container{Args: []string{"--a=$(A)b"}, Env: []corev1.EnvVar{{Name: "A", Value: "v"}}}, want: []string{"--a=vb"}},
		{name: "namespace", c: corev1.Container{Args: []string{"--n=$(NS)"}, Env: []corev1.EnvVar{ns}}, want: []string{"--n=pvguard"}},
		{name: "memory limit", c: corev1.Container{Args: []string{"--m=$(LIMIT)"}, Env: []corev1.EnvVar{limit},
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}, want: []string{"--m=1073741824"}},
		{name: "no memory limit", c: corev1.Container{Args: []string{"--m=$(LIMIT)"}, Env: []corev1.EnvVar{limit}}, want: []string{"--m="}},
		{name: "undefined", c: corev1.Container{Name: "pvguard", Args: []string{"--m=$(NOPE)"}}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ContainerArgs(tc.c, "pvguard")
			if (err != nil) != tc.wantErr {
				t.Fatalf("ContainerArgs error = %v, want error %v", err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ContainerArgs = %q, want %q", got, tc.want)
			}
		})
	}
}
