package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/nephele-dev/nephele/cloud"
	"github.com/nephele-dev/nephele/localcloud/api"
)

func volumePath(id string) string { return "/v1/volumes/" + seg(id) }

// CreateVolume creates a volume, or returns the one of that name when it exists with
// the same zone and size (the name is the create's idempotency token); with another
// zone or size it fails with a 409 *Error of reason AlreadyExists.
func (c *Client) CreateVolume(ctx context.Context, spec api.VolumeSpec) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, http.MethodPost, "/v1/volumes", nil, spec, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetVolume returns the volume with the given ID; an error wrapping cloud.ErrNotFound
// means the cloud says it does not exist.
func (c *Client) GetVolume(ctx context.Context, id string) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, http.MethodGet, volumePath(id), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetVolumeByName returns the volume with the given name; an error wrapping
// cloud.ErrNotFound means there is none.
func (c *Client) GetVolumeByName(ctx context.Context, name string) (*api.Volume, error) {
	var out api.VolumeList
	if err := c.do(ctx, http.MethodGet, "/v1/volumes", url.Values{"name": {name}}, nil, &out); err != nil {
		return nil, err
	}
	if len(out.Items) == 0 {
		return nil, fmt.Errorf("local cloud: volume named %q: %w", name, cloud.ErrNotFound)
	}
	return &out.Items[0], nil
}

// ListVolumes returns every volume, in ID (creation) order.
func (c *Client) ListVolumes(ctx context.Context) ([]api.Volume, error) {
	var out api.VolumeList
	if err := c.do(ctx, http.MethodGet, "/v1/volumes", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Items, nil
}

// DeleteVolume deletes an available volume and its data. An attached volume fails with
// a 409 *Error; one that does not exist with an error wrapping cloud.ErrNotFound.
func (c *Client) DeleteVolume(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, volumePath(id), nil, nil, nil)
}

// AttachVolume attaches a volume to an instance of its zone and returns it with its
// device when the instance is a host. Attaching it to the instance it is attached to
// succeeds; to another instance, or past the instance's attach limit, fails with a 409
// *Error.
func (c *Client) AttachVolume(ctx context.Context, id, instanceID string) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, http.MethodPost, volumePath(id)+"/attach", nil, api.VolumeAttachment{InstanceID: instanceID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DetachVolume detaches a volume from an instance. A volume attached to nothing is
// detached already (success); one attached to another instance fails with a 409 *Error.
func (c *Client) DetachVolume(ctx context.Context, id, instanceID string) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, http.MethodPost, volumePath(id)+"/detach", nil, api.VolumeAttachment{InstanceID: instanceID}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ExpandVolume grows a volume to sizeBytes (rounded up to api.VolumeSizeUnit); its
// device, when attached to a host, grows with it. A smaller size fails with a 400 *Error.
func (c *Client) ExpandVolume(ctx context.Context, id string, sizeBytes int64) (*api.Volume, error) {
	var out api.Volume
	if err := c.do(ctx, http.MethodPost, volumePath(id)+"/expand", nil, api.VolumeExpansion{SizeBytes: sizeBytes}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
