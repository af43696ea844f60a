package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/pvguard/pvguard/test/csisidecars"
)

// SetChartValues reinstalls pvguard in the current mode with the chart values edited by values
// (nil: the chart's defaults), replacing Options.ChartValues for this and later mode switches,
// and waits until the mode answers again (as Use does). kube-controller-manager keeps running. A
// test that needs a non-default policy sets it and restores the previous edits (ChartValues)
// when it ends.
func (c *Cluster) SetChartValues(values func(map[string]any)) error {
	c.chartValues = values
	if c.pvguard == nil {
		return nil
	}
	mode := c.pvguard.Binder
	if err := c.pvguard.Stop(); err != nil {
		return err
	}
	c.pvguard = nil
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if c.pvguard, err = c.startPVGuard(ctx, mode); err != nil {
		return fmt.Errorf("reinstalling pvguard with new chart values: %w", err)
	}
	if err := c.probeMode(ctx, c.mode); err != nil {
		return fmt.Errorf("mode %s after reinstalling pvguard: %w", c.mode, err)
	}
	return nil
}

// ChartValues are the chart value edits pvguard is installed with now.
func (c *Cluster) ChartValues() func(map[string]any) { return c.chartValues }

// ChartComponents are the chart's default webhook.components.identities: kube-controller-manager,
// kube-scheduler, the nodes and kube-system's ServiceAccounts (kube-controller-manager's
// controllers and the snapshot-controller run as those here).
var ChartComponents = []map[string]string{
	{"user": ControllerManagerUser},
	{"user": SchedulerUser},
	{"group": "system:nodes"},
	{"namespace": "kube-system"},
}

// componentIdentities are the chart's webhook.components.identities pvguard is installed with:
// the chart's defaults, the CSI sidecars' namespace and Options.Components. A ServiceAccount of
// any other namespace (a test's own, a tenant's) is not a component: its writes go to the
// people's webhooks.
func (c *Cluster) componentIdentities() []any {
	var out []any
	for _, l := range [][]map[string]string{ChartComponents, {{"namespace": csisidecars.DefaultNamespace}}, c.components} {
		for _, id := range l {
			m := map[string]any{}
			for k, v := range id {
				m[k] = v
			}
			out = append(out, m)
		}
	}
	return out
}
