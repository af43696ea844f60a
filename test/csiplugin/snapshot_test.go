package csiplugin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// volumeWith creates volume name on node a with size bytes and writes files (path -> content)
// into its data directory, as a pod using it would have.
func volumeWith(t *testing.T, c client, name string, size int64, files map[string]string) string {
	t.Helper()
	resp, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{rwo},
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}})
	if err != nil {
		t.Fatalf("creating volume %s: %v", name, err)
	}
	id := resp.GetVolume().GetVolumeId()
	writeFiles(t, filepath.Join(c.p.Dir(id), "data"), files)
	return id
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		file := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
}

// checkFiles fails unless dir holds exactly files.
func checkFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		got[rel] = string(data)
		return err
	})
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	if len(got) != len(files) {
		t.Errorf("%s holds %v, want %v", dir, got, files)
		return
	}
	for rel, want := range files {
		if got[rel] != want {
			t.Errorf("%s/%s = %q, want %q", dir, rel, got[rel], want)
		}
	}
}

var data1 = map[string]string{"hello.txt": "hello", "sub/dir/deep.txt": "deep"}

func snapshotSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: id}}}
}

func volumeSource(id string) *csi.VolumeContentSource {
	return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: id}}}
}

func TestCreateSnapshot(t *testing.T) {
	cases := []struct {
		name string
		// second, when set, is a request made after the first one succeeded.
		first, second *csi.CreateSnapshotRequest
		wantCode      codes.Code
	}{
		{name: "a snapshot of a volume", first: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-src", Parameters: map[string]string{"k": "v"}}},
		{name: "a retry returns the same snapshot", first: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-src"},
			second: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-src"}},
		{name: "the name of a snapshot of another volume", first: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-src"},
			second: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-other"}, wantCode: codes.AlreadyExists},
		{name: "no name", first: &csi.CreateSnapshotRequest{SourceVolumeId: "pvc-src"}, wantCode: codes.InvalidArgument},
		{name: "no source", first: &csi.CreateSnapshotRequest{Name: "snapshot-1"}, wantCode: codes.InvalidArgument},
		{name: "a source that does not exist", first: &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: "pvc-missing"}, wantCode: codes.NotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, Options{})
			src := volumeWith(t, c, "pvc-src", 5<<20, data1)
			volumeWith(t, c, "pvc-other", 5<<20, nil)
			req, wantFirst := tc.first, tc.wantCode
			if tc.second != nil {
				wantFirst = codes.OK
			}
			resp, err := c.CreateSnapshot(ctx(t), req)
			if codeOf(err) != wantFirst {
				t.Fatalf("CreateSnapshot: %v, want code %v", err, wantFirst)
			}
			if tc.second != nil {
				again, err := c.CreateSnapshot(ctx(t), tc.second)
				if codeOf(err) != tc.wantCode {
					t.Fatalf("second CreateSnapshot: %v, want code %v", err, tc.wantCode)
				}
				if err == nil && again.GetSnapshot().GetSnapshotId() != resp.GetSnapshot().GetSnapshotId() {
					t.Errorf("retry returned snapshot %s, first %s", again.GetSnapshot().GetSnapshotId(), resp.GetSnapshot().GetSnapshotId())
				}
			}
			snaps, lerr := c.p.Snapshots()
			if lerr != nil {
				t.Fatal(lerr)
			}
			if wantFirst != codes.OK {
				if len(snaps) != 0 {
					t.Errorf("a refused CreateSnapshot left snapshots %+v", snaps)
				}
				return
			}
			snap := resp.GetSnapshot()
			if snap.GetSourceVolumeId() != src || snap.GetSizeBytes() != 5<<20 || !snap.GetReadyToUse() || snap.GetCreationTime() == nil {
				t.Errorf("snapshot %v: want of %s, 5 MiB, ready, with a creation time", snap, src)
			}
			if len(snaps) != 1 || snaps[0].ID != snap.GetSnapshotId() || snaps[0].Name != req.GetName() || snaps[0].SourceVolumeID != src {
				t.Errorf("store holds %+v, want one snapshot %s of %s", snaps, snap.GetSnapshotId(), src)
			}
			checkFiles(t, filepath.Join(c.p.SnapshotDir(snap.GetSnapshotId()), "data"), data1)
			if vols, _ := c.p.Volumes(); len(vols) != 2 {
				t.Errorf("volumes %+v: a snapshot must not be listed as a volume", vols)
			}
		})
	}
}

// TestSnapshotIsACopy: writes to the source after the snapshot do not reach it.
func TestSnapshotIsACopy(t *testing.T) {
	c := start(t, Options{})
	src := volumeWith(t, c, "pvc-src", 1<<20, data1)
	resp, err := c.CreateSnapshot(ctx(t), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: src})
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(c.p.Dir(src), "data"), map[string]string{"hello.txt": "changed", "new.txt": "new"})
	checkFiles(t, filepath.Join(c.p.SnapshotDir(resp.GetSnapshot().GetSnapshotId()), "data"), data1)
}

func TestCreateVolumeFromSource(t *testing.T) {
	after := map[string]string{"hello.txt": "changed after the snapshot", "sub/dir/deep.txt": "deep"}
	cases := []struct {
		name string
		// source builds the content source from the snapshot and source volume ids.
		source   func(snap, vol string) *csi.VolumeContentSource
		cr       *csi.CapacityRange
		wantCode codes.Code
		wantSize int64
		wantData map[string]string
	}{
		{name: "restore from a snapshot", source: func(snap, _ string) *csi.VolumeContentSource { return snapshotSource(snap) },
			cr: &csi.CapacityRange{RequiredBytes: 8 << 20}, wantSize: 8 << 20, wantData: data1},
		{name: "clone of a volume", source: func(_, vol string) *csi.VolumeContentSource { return volumeSource(vol) },
			cr: &csi.CapacityRange{RequiredBytes: 4 << 20}, wantSize: 4 << 20, wantData: after},
		{name: "smaller than the source: grown to it", source: func(snap, _ string) *csi.VolumeContentSource { return snapshotSource(snap) },
			cr: &csi.CapacityRange{RequiredBytes: 1 << 20}, wantSize: 4 << 20, wantData: data1},
		{name: "limit below the source", source: func(_, vol string) *csi.VolumeContentSource { return volumeSource(vol) },
			cr: &csi.CapacityRange{LimitBytes: 1 << 20}, wantCode: codes.OutOfRange},
		{name: "a snapshot that does not exist", source: func(string, string) *csi.VolumeContentSource { return snapshotSource("snapshot-missing") },
			wantCode: codes.NotFound},
		{name: "a volume that does not exist", source: func(string, string) *csi.VolumeContentSource { return volumeSource("pvc-missing") },
			wantCode: codes.NotFound},
		{name: "a snapshot source without an id", source: func(string, string) *csi.VolumeContentSource { return snapshotSource("") },
			wantCode: codes.InvalidArgument},
		{name: "a source of neither kind", source: func(string, string) *csi.VolumeContentSource { return &csi.VolumeContentSource{} },
			wantCode: codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := start(t, Options{})
			vol := volumeWith(t, c, "pvc-src", 4<<20, data1)
			snap, err := c.CreateSnapshot(ctx(t), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: vol})
			if err != nil {
				t.Fatal(err)
			}
			writeFiles(t, filepath.Join(c.p.Dir(vol), "data"), after)
			source := tc.source(snap.GetSnapshot().GetSnapshotId(), vol)
			resp, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: "pvc-new", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				CapacityRange: tc.cr, VolumeContentSource: source, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("b")}})
			if codeOf(err) != tc.wantCode {
				t.Fatalf("CreateVolume: %v, want code %v", err, tc.wantCode)
			}
			if tc.wantCode != codes.OK {
				if _, ok, _ := c.p.Volume("pvc-new"); ok {
					t.Error("a refused CreateVolume left its volume")
				}
				return
			}
			v := resp.GetVolume()
			if v.GetCapacityBytes() != tc.wantSize {
				t.Errorf("volume of %d bytes, want %d", v.GetCapacityBytes(), tc.wantSize)
			}
			if !sameSource(&Source{Kind: kindOf(source), ID: idOf(source)}, v.GetContentSource()) {
				t.Errorf("answered content source %v, want %v", v.GetContentSource(), source)
			}
			checkFiles(t, filepath.Join(c.p.Dir(v.GetVolumeId()), "data"), tc.wantData)

			// A retry with the same source is the same volume; with another, ALREADY_EXISTS.
			retry := &csi.CreateVolumeRequest{Name: "pvc-new", VolumeCapabilities: []*csi.VolumeCapability{rwo},
				CapacityRange: tc.cr, VolumeContentSource: source, AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("b")}}
			if _, err := c.CreateVolume(ctx(t), retry); err != nil {
				t.Errorf("retry with the same source: %v", err)
			}
			retry.VolumeContentSource = nil
			if _, err := c.CreateVolume(ctx(t), retry); codeOf(err) != codes.AlreadyExists {
				t.Errorf("retry without the source: %v, want ALREADY_EXISTS", err)
			}
		})
	}
}

func kindOf(cs *csi.VolumeContentSource) string {
	if cs.GetSnapshot() != nil {
		return SourceSnapshot
	}
	return SourceVolume
}

func idOf(cs *csi.VolumeContentSource) string {
	return cs.GetSnapshot().GetSnapshotId() + cs.GetVolume().GetVolumeId()
}

// TestDeleteSnapshot: a snapshot goes, its restored volumes keep their data; an unknown id
// succeeds, a missing one is refused.
func TestDeleteSnapshot(t *testing.T) {
	c := start(t, Options{})
	vol := volumeWith(t, c, "pvc-src", 1<<20, data1)
	snap, err := c.CreateSnapshot(ctx(t), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: vol})
	if err != nil {
		t.Fatal(err)
	}
	id := snap.GetSnapshot().GetSnapshotId()
	restored, err := c.CreateVolume(ctx(t), &csi.CreateVolumeRequest{Name: "pvc-new", VolumeCapabilities: []*csi.VolumeCapability{rwo},
		VolumeContentSource: snapshotSource(id), AccessibilityRequirements: &csi.TopologyRequirement{Requisite: nodes("a")}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		id       string
		wantCode codes.Code
	}{
		{name: "the snapshot", id: id},
		{name: "again: already gone", id: id},
		{name: "an id that never was", id: "snapshot-never"},
		{name: "an id that names no path in the store", id: "../x"},
		{name: "no id", wantCode: codes.InvalidArgument},
	}
	for _, tc := range cases {
		if _, err := c.DeleteSnapshot(ctx(t), &csi.DeleteSnapshotRequest{SnapshotId: tc.id}); codeOf(err) != tc.wantCode {
			t.Errorf("%s: DeleteSnapshot: %v, want code %v", tc.name, err, tc.wantCode)
		}
	}
	if snaps, err := c.p.Snapshots(); err != nil || len(snaps) != 0 {
		t.Errorf("after DeleteSnapshot the store holds %+v (%v)", snaps, err)
	}
	checkFiles(t, filepath.Join(c.p.Dir(restored.GetVolume().GetVolumeId()), "data"), data1)
}

func TestListSnapshots(t *testing.T) {
	c := start(t, Options{})
	a := volumeWith(t, c, "pvc-a", 1<<20, nil)
	b := volumeWith(t, c, "pvc-b", 1<<20, nil)
	for _, r := range []struct{ name, src string }{{"snapshot-1", a}, {"snapshot-2", a}, {"snapshot-3", b}} {
		if _, err := c.CreateSnapshot(ctx(t), &csi.CreateSnapshotRequest{Name: r.name, SourceVolumeId: r.src}); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name      string
		req       *csi.ListSnapshotsRequest
		wantCode  codes.Code
		wantIDs   []string
		wantToken string
	}{
		{name: "all", req: &csi.ListSnapshotsRequest{}, wantIDs: []string{"snapshot-1", "snapshot-2", "snapshot-3"}},
		{name: "by id", req: &csi.ListSnapshotsRequest{SnapshotId: "snapshot-2"}, wantIDs: []string{"snapshot-2"}},
		{name: "an unknown id: empty", req: &csi.ListSnapshotsRequest{SnapshotId: "snapshot-9"}},
		{name: "by source", req: &csi.ListSnapshotsRequest{SourceVolumeId: a}, wantIDs: []string{"snapshot-1", "snapshot-2"}},
		{name: "id and another source: empty", req: &csi.ListSnapshotsRequest{SnapshotId: "snapshot-3", SourceVolumeId: a}},
		{name: "first page", req: &csi.ListSnapshotsRequest{MaxEntries: 2}, wantIDs: []string{"snapshot-1", "snapshot-2"}, wantToken: "2"},
		{name: "last page", req: &csi.ListSnapshotsRequest{MaxEntries: 2, StartingToken: "2"}, wantIDs: []string{"snapshot-3"}},
		{name: "a token past the end", req: &csi.ListSnapshotsRequest{StartingToken: "4"}, wantCode: codes.Aborted},
		{name: "a token that is no index", req: &csi.ListSnapshotsRequest{StartingToken: "x"}, wantCode: codes.Aborted},
		{name: "negative max_entries", req: &csi.ListSnapshotsRequest{MaxEntries: -1}, wantCode: codes.InvalidArgument},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.ListSnapshots(ctx(t), tc.req)
			if codeOf(err) != tc.wantCode {
				t.Fatalf("ListSnapshots: %v, want code %v", err, tc.wantCode)
			}
			var ids []string
			for _, e := range resp.GetEntries() {
				ids = append(ids, e.GetSnapshot().GetSnapshotId())
			}
			if len(ids) != len(tc.wantIDs) || resp.GetNextToken() != tc.wantToken {
				t.Fatalf("entries %v next %q, want %v next %q", ids, resp.GetNextToken(), tc.wantIDs, tc.wantToken)
			}
			for i := range ids {
				if ids[i] != tc.wantIDs[i] {
					t.Errorf("entries %v, want %v", ids, tc.wantIDs)
				}
			}
		})
	}
}

func TestCopyTree(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	writeFiles(t, src, data1)
	if err := os.Symlink("hello.txt", filepath.Join(src, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(src, "hello.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "dst")
	if err := copyTree(src, dst); err != nil {
		t.Fatal(err)
	}
	if link, err := os.Readlink(filepath.Join(dst, "link")); err != nil || link != "hello.txt" {
		t.Errorf("link copied as %q, %v; want a link to hello.txt", link, err)
	}
	if fi, err := os.Stat(filepath.Join(dst, "hello.txt")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("hello.txt copied with %v, %v; want mode 0600", fi.Mode(), err)
	}
	if err := os.Remove(filepath.Join(dst, "link")); err != nil {
		t.Fatal(err)
	}
	checkFiles(t, dst, data1)
	if err := copyTree(src, dst); err == nil {
		t.Error("copying onto an existing directory: no error")
	}
}
