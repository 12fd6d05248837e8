package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// unpack extracts the image's file system into dir, as a container
// runtime does, and returns it.
func unpack(t *testing.T, img v1.Image) string {
	t.Helper()
	dir := t.TempDir()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		if err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		if !strings.HasPrefix(target, dir+string(filepath.Separator)) {
			t.Fatalf("layer entry %q leaves the root", hdr.Name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
		default:
			t.Fatalf("unexpected entry %s of type %c", hdr.Name, hdr.Typeflag)
		}
	}
}

// checkImage checks the config of an image built by make image or by the
// test, unpacks it and runs every binary with --version and --help. It
// returns the unpacked root.
func checkImage(t *testing.T, img v1.Image, entrypoint, version, revision string, binaries []string) string {
	t.Helper()
	mt, err := img.MediaType()
	if err != nil || mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s (%v), want OCI", mt, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Config.Entrypoint; len(got) != 1 || got[0] != entrypoint {
		t.Errorf("entrypoint %v, want [%s]", got, entrypoint)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", cfg.Config.User)
	}
	if cfg.OS != "linux" || cfg.Architecture == "" {
		t.Errorf("platform %s/%s", cfg.OS, cfg.Architecture)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.revision": revision,
	} {
		if got := cfg.Config.Labels[k]; got != want {
			t.Errorf("label %s=%q, want %q", k, got, want)
		}
	}
	root := unpack(t, img)
	for _, sh := range []string{"bin/sh", "usr/bin/sh", "bin/busybox"} {
		if _, err := os.Stat(filepath.Join(root, sh)); err == nil {
			t.Errorf("the image has a shell: /%s", sh)
		}
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if err != nil || !strings.Contains(string(passwd), ":65532:65532:") {
		t.Errorf("/etc/passwd names no user 65532: %q, %v", passwd, err)
	}
	if runtime.GOOS != "linux" || runtime.GOARCH != cfg.Architecture {
		t.Logf("cannot run %s/%s binaries on %s/%s", cfg.OS, cfg.Architecture, runtime.GOOS, runtime.GOARCH)
		return root
	}
	for _, bin := range binaries {
		path := filepath.Join(root, filepath.FromSlash(strings.TrimPrefix(bin, "/")))
		for _, arg := range []string{"--version", "--help"} {
			out, err := exec.Command(path, arg).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s from the unpacked image: %v\n%s", bin, arg, err, out)
			}
			if arg == "--version" && !strings.Contains(string(out), version) {
				t.Errorf("%s --version says %q, want %s", bin, out, version)
			}
		}
	}
	return root
}

// readLayout reads the one image of an OCI layout directory. The layout,
// unlike the docker-format tarball, keeps the OCI manifest as written.
func readLayout(t *testing.T, dir string) v1.Image {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	index, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := index.IndexManifest()
	if err != nil || len(manifest.Manifests) != 1 {
		t.Fatalf("the layout holds %v images (%v), want 1", manifest, err)
	}
	img, err := lp.Image(manifest.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// TestBuildImage builds an image of a small static binary, writes both
// outputs, reads each back, checks its config, runs the binary from the
// unpacked layer, and builds it again to the same digest.
func TestBuildImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./testdata/hello")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test binary: %v\n%s", err, out)
	}
	opts := options{
		Files:      []fileSpec{{Source: bin, Path: "/usr/local/bin/hello"}},
		Entrypoint: "/usr/local/bin/hello",
		Version:    "v9.9.9",
		Revision:   "feedface",
		Created:    time.Unix(1700000000, 0).UTC(),
		Arch:       runtime.GOARCH,
	}
	layoutDir, tarPath := filepath.Join(dir, "oci"), filepath.Join(dir, "image.tar")
	if err := run(opts, layoutDir, tarPath, "example.com/hello:v9.9.9"); err != nil {
		t.Fatal(err)
	}

	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	fromLayout := readLayout(t, layoutDir)
	checkImage(t, fromLayout, "/usr/local/bin/hello", "v9.9.9", "feedface", []string{"/usr/local/bin/hello"})
	cfgDigest := func(img v1.Image) v1.Hash {
		h, err := img.ConfigName()
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if cfgDigest(fromTar) != cfgDigest(fromLayout) {
		t.Errorf("the tarball and the layout hold different images")
	}

	again, err := build(opts)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := fromLayout.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Errorf("two builds from the same inputs differ: %s and %s", d1, d2)
	}
	opts.Created = opts.Created.Add(time.Second)
	later, err := build(opts)
	if err != nil {
		t.Fatal(err)
	}
	if d3, _ := later.Digest(); d3 == d1 {
		t.Errorf("the creation time does not reach the image")
	}
}

// TestMadeImage checks the image make image built (make image-check sets
// PHALANX_IMAGE to its OCI layout, with the version and commit it was
// built with): both Phalanx binaries run from the unpacked layer.
func TestMadeImage(t *testing.T) {
	path := os.Getenv("PHALANX_IMAGE")
	if path == "" {
		t.Skip("PHALANX_IMAGE is not set: make image-check builds the image and sets it")
	}
	img := readLayout(t, path)
	checkImage(t, img, "/usr/local/bin/phalanx-scheduler", os.Getenv("PHALANX_IMAGE_VERSION"), os.Getenv("PHALANX_IMAGE_REVISION"),
		[]string{"/usr/local/bin/phalanx-scheduler", "/usr/local/bin/phalanx-controller"})
}
