// Command ociimage builds the Phalanx container image without a docker
// daemon or any base image: FROM scratch, the given static binaries, an
// /etc/passwd naming the non-root user they run as, and nothing else (no
// shell, no package manager). It writes an OCI image layout directory
// (for skopeo, crane, podman or a registry) and a tarball that `docker
// load` and `crane push` take. The same inputs give the same image digest:
// every timestamp is the -created time (make image passes the commit's
// time) and the layer's entries are written in a fixed order.
//
//	ociimage -layout bin/image/oci -tarball bin/image/phalanx.tar -tag phalanx:dev \
//	  -file bin/image/phalanx-scheduler=/usr/local/bin/phalanx-scheduler ... \
//	  -entrypoint /usr/local/bin/phalanx-scheduler -version v0.1.0 -revision <commit> -created <unix seconds>
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"
)

type fileFlags []fileSpec

func (f *fileFlags) String() string { return fmt.Sprint(*f) }

func (f *fileFlags) Set(v string) error {
	src, dst, ok := strings.Cut(v, "=")
	if !ok || src == "" || !strings.HasPrefix(dst, "/") {
		return fmt.Errorf("want SOURCE=/absolute/path/in/image, got %q", v)
	}
	*f = append(*f, fileSpec{Source: src, Path: dst})
	return nil
}

func main() {
	var opts options
	var files fileFlags
	fs := flag.NewFlagSet("ociimage", flag.ExitOnError)
	fs.Var(&files, "file", "SOURCE=/path/in/image: an executable to put into the image (repeatable)")
	fs.StringVar(&opts.Entrypoint, "entrypoint", "", "the image's entrypoint (a path given by -file)")
	fs.StringVar(&opts.Version, "version", "dev", "org.opencontainers.image.version")
	fs.StringVar(&opts.Revision, "revision", "unknown", "org.opencontainers.image.revision: the commit")
	created := fs.Int64("created", 0, "every timestamp of the image, in Unix seconds (SOURCE_DATE_EPOCH: the commit time)")
	fs.StringVar(&opts.Arch, "arch", "amd64", "the binaries' GOARCH")
	layout := fs.String("layout", "", "write an OCI image layout directory here")
	tarball := fs.String("tarball", "", "write an image tarball (docker load, crane push) here")
	tag := fs.String("tag", "phalanx:dev", "the name the tarball carries")
	_ = fs.Parse(os.Args[1:])
	opts.Files = files
	opts.Created = time.Unix(*created, 0).UTC()
	if err := run(opts, *layout, *tarball, *tag); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

func run(opts options, layoutDir, tarballPath, tag string) error {
	if layoutDir == "" && tarballPath == "" {
		return fmt.Errorf("give -layout or -tarball (or both)")
	}
	img, err := build(opts)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	if layoutDir != "" {
		if err := writeLayout(layoutDir, img); err != nil {
			return err
		}
		fmt.Printf("OCI layout %s\n", layoutDir)
	}
	if tarballPath != "" {
		if err := writeTarball(tarballPath, tag, img); err != nil {
			return err
		}
		fmt.Printf("image tarball %s (%s)\n", tarballPath, tag)
	}
	fmt.Printf("digest %s\n", digest)
	return nil
}
