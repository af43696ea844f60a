package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pvguard/pvguard/internal/devcluster"
)

// StopPVGuard stops every pvguard replica (this cluster runs one) and leaves everything else as
// it is: the webhook configurations stay registered, pointing at a port nothing listens on, and
// the admission policies stay installed, as in a cluster whose pvguard pods are all gone.
// kube-controller-manager and the CSI path keep running. StartPVGuard starts it again; Use
// does too.
func (c *Cluster) StopPVGuard() error {
	if c.pvguard == nil {
		return errors.New("pvguard is not running")
	}
	mode := c.pvguard.Binder
	err := c.pvguard.Stop()
	c.pvguard, c.stoppedBinder = nil, mode
	return err
}

// StartPVGuard starts the pvguard StopPVGuard stopped, with the same --binder and chart values,
// points the webhook configurations at it and waits until the mode answers again (as Use does).
func (c *Cluster) StartPVGuard() error {
	if c.pvguard != nil {
		return nil
	}
	if c.stoppedBinder == "" {
		return errors.New("no pvguard was stopped: use Use")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if c.pvguard, err = c.startPVGuard(ctx, c.stoppedBinder); err != nil {
		return fmt.Errorf("starting pvguard again: %w", err)
	}
	c.stoppedBinder = ""
	if err := c.probeMode(ctx, c.mode); err != nil {
		return fmt.Errorf("mode %s after starting pvguard again: %w", c.mode, err)
	}
	return nil
}

// PointWebhooks re-creates pvguard's webhook configurations, rendered with the chart values
// pvguard was installed with, pointed at baseURL with caBundle, without waiting for anything to
// answer there: a test points them at a listener that never answers. StartPVGuard (or Use)
// points them back at pvguard.
func (c *Cluster) PointWebhooks(ctx context.Context, baseURL string, caBundle []byte) error {
	return devcluster.InstallWebhooks(ctx, c.Admin, devcluster.WebhookOptions{BaseURL: baseURL, CABundle: caBundle, Values: c.webhookValues, NoWait: true})
}
