package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the binaries run as: the Deployments' runAsUser, and the uid of
// distroless's "nonroot", so that a cluster's policies written for one
// fit the other.
const (
	uid      = 65532
	userName = "nonroot"
)

type fileSpec struct {
	Source string // a file on this machine
	Path   string // where it goes in the image
}

type options struct {
	Files      []fileSpec
	Entrypoint string
	Version    string
	Revision   string
	Created    time.Time
	Arch       string
}

// build assembles the image: one layer, an OCI manifest and config.
//
// No CA certificates: both binaries talk only to the API server, whose CA
// comes with the ServiceAccount token (or the kubeconfig), and to nothing
// on the public internet; a bundle copied from the build machine would
// also make the image depend on that machine.
func build(o options) (v1.Image, error) {
	if len(o.Files) == 0 {
		return nil, fmt.Errorf("no -file given")
	}
	found := false
	for _, f := range o.Files {
		found = found || f.Path == o.Entrypoint
	}
	if !found {
		return nil, fmt.Errorf("entrypoint %q is none of the -file paths", o.Entrypoint)
	}
	layerTar, err := layerBytes(o)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "hack/ociimage (make image)", Comment: "static binaries, FROM scratch"},
	})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS = o.Arch, "linux"
	cfg.Created = v1.Time{Time: o.Created}
	cfg.Config.Entrypoint = []string{o.Entrypoint}
	cfg.Config.Cmd = nil
	cfg.Config.User = fmt.Sprintf("%d:%d", uid, uid)
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"PATH=/usr/local/bin"}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "phalanx",
		"org.opencontainers.image.description": "kube-scheduler with the Phalanx gang, topology and preemption plugins (entrypoint), and phalanx-controller",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.revision":    o.Revision,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
		"org.opencontainers.image.base.name":   "scratch",
	}
	return mutate.ConfigFile(img, cfg)
}

// layerBytes writes the layer's tar: parent directories, /etc/passwd and
// /etc/group for the non-root user, then the files, all owned by root,
// dated o.Created, in path order.
func layerBytes(o options) ([]byte, error) {
	type entry struct {
		hdr  tar.Header
		data []byte
	}
	entries := map[string]entry{}
	addDirs := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			name := strings.TrimPrefix(d, "/") + "/"
			entries[name] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: name, Mode: 0o755}}
		}
	}
	addFile := func(p string, mode int64, data []byte) {
		addDirs(p)
		name := strings.TrimPrefix(p, "/")
		entries[name] = entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data))}, data: data}
	}
	addFile("/etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/home/%s:/sbin/nologin\n", userName, uid, uid, userName, userName)))
	addFile("/etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\n%s:x:%d:\n", userName, uid)))
	// The non-root user's home, which some libraries look up; read-only
	// like the rest (the Deployments mount the root file system so).
	entries["home/"+userName+"/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "home/" + userName + "/", Mode: 0o755, Uid: uid, Gid: uid}}
	entries["home/"] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "home/", Mode: 0o755}}
	for _, f := range o.Files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return nil, err
		}
		addFile(f.Path, 0o755, data)
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := entries[n]
		e.hdr.ModTime = o.Created
		e.hdr.Format = tar.FormatPAX
		if e.hdr.Uid == 0 {
			e.hdr.Uname, e.hdr.Gname = "root", "root"
		} else {
			e.hdr.Uname, e.hdr.Gname = userName, userName
		}
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeLayout replaces dir with an OCI image layout holding img alone.
func writeLayout(dir string, img v1.Image) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img)
}

func writeTarball(file, tag string, img v1.Image) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(file, ref, img)
}
