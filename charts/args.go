package charts

import (
	"fmt"
	"regexp"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// envReference is a $(NAME) reference in a container's arguments.
var envReference = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

// ContainerArgs returns a rendered container's arguments with the $(NAME) references to its
// environment expanded, as the kubelet expands them, for running the container's command in a
// process of one's own (`pvguard-dev`, the end-to-end suites). Of the downward API it knows
// what the chart uses: the pod's namespace (given) and the container's memory limit (empty
// when it has none; the kubelet would give the node's allocatable memory). A reference it
// cannot resolve is an error, so that no literal "$(NAME)" reaches a flag.
func ContainerArgs(c corev1.Container, namespace string) ([]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		case e.ValueFrom.ResourceFieldRef != nil && e.ValueFrom.ResourceFieldRef.Resource == "limits.memory":
			env[e.Name] = ""
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
				env[e.Name] = strconv.FormatInt(q.Value(), 10)
			}
		}
	}
	out := make([]string, len(c.Args))
	for i, a := range c.Args {
		var missing string
		out[i] = envReference.ReplaceAllStringFunc(a, func(ref string) string {
			name := envReference.FindStringSubmatch(ref)[1]
			v, ok := env[name]
			if !ok {
				missing = name
			}
			return v
		})
		if missing != "" {
			return nil, fmt.Errorf("container %s: argument %q refers to $(%s), which its env does not define in a way this can resolve", c.Name, a, missing)
		}
	}
	return out, nil
}
