// Copyright The telesched Authors.
// SPDX-License-Identifier: Apache-2.0

package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Epoch is the modification time of every file in the layers and the
// image's creation time, so that the same inputs give the same digest
// (https://reproducible-builds.org/docs/source-date-epoch/; Build takes
// another through Options.Created).
var Epoch = time.Unix(0, 0).UTC()

// Entry is one file, directory or symbolic link of a layer.
type Entry struct {
	// Path is absolute, as the container sees it ("/etc/passwd").
	Path string
	// Mode is the permission bits with setuid/setgid/sticky (fs.ModeSticky
	// for /tmp), and fs.ModeDir or fs.ModeSymlink for those; none is a
	// regular file.
	Mode fs.FileMode
	UID  int
	GID  int
	// Data is a regular file's content, unless Source names a file on this
	// host to read it from.
	Data   []byte
	Source string
	// Link is a symbolic link's target.
	Link string
}

// File is a root-owned regular file with the given content and mode.
func File(p string, mode fs.FileMode, data []byte) Entry {
	return Entry{Path: p, Mode: mode, Data: data}
}

// HostFile is a root-owned regular file whose content is read from src on
// this host when the layer is built.
func HostFile(p string, mode fs.FileMode, src string) Entry {
	return Entry{Path: p, Mode: mode, Source: src}
}

// Dir is a directory.
func Dir(p string, mode fs.FileMode, uid, gid int) Entry {
	return Entry{Path: p, Mode: fs.ModeDir | mode, UID: uid, GID: gid}
}

// Symlink is a root-owned symbolic link.
func Symlink(p, target string) Entry {
	return Entry{Path: p, Mode: fs.ModeSymlink | 0o777, Link: target}
}

// Layer builds a layer of the entries: sorted by path, every parent
// directory present (0755, root, where the entries do not name it), every
// time Epoch, no user or group names, so the same entries always give the
// same bytes. Two entries for one path are an error.
func Layer(entries []Entry, created time.Time) (v1.Layer, error) {
	byPath := map[string]Entry{}
	for _, e := range entries {
		p := path.Clean(e.Path)
		if !path.IsAbs(p) || p == "/" {
			return nil, fmt.Errorf("layer entry %q: path must be absolute and not /", e.Path)
		}
		e.Path = p
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("layer entry %q: named twice", p)
		}
		byPath[p] = e
	}
	for p := range byPath {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Dir(d, 0o755, 0, 0)
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		e := byPath[p]
		if err := writeEntry(tw, e, created); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithCompressedCaching)
}

func writeEntry(tw *tar.Writer, e Entry, created time.Time) error {
	h := &tar.Header{
		Name:    strings.TrimPrefix(e.Path, "/"),
		Mode:    int64(e.Mode.Perm()),
		Uid:     e.UID,
		Gid:     e.GID,
		ModTime: created,
		Format:  tar.FormatPAX,
	}
	if e.Mode&fs.ModeSetuid != 0 {
		h.Mode |= 0o4000
	}
	if e.Mode&fs.ModeSetgid != 0 {
		h.Mode |= 0o2000
	}
	if e.Mode&fs.ModeSticky != 0 {
		h.Mode |= 0o1000
	}
	var data []byte
	switch {
	case e.Mode.IsDir():
		h.Typeflag = tar.TypeDir
		h.Name += "/"
	case e.Mode&fs.ModeSymlink != 0:
		h.Typeflag = tar.TypeSymlink
		h.Linkname = e.Link
	case e.Mode.IsRegular():
		h.Typeflag = tar.TypeReg
		data = e.Data
		if e.Source != "" {
			var err error
			if data, err = os.ReadFile(e.Source); err != nil {
				return err
			}
		}
		h.Size = int64(len(data))
	default:
		return fmt.Errorf("mode %v: only regular files, directories and symbolic links", e.Mode)
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}
