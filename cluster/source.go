package cluster

// Topologies submitted as files (gale submit --file FILE.yaml): the submitter
// resolves the file (flux.Load: substitutions, includes) and ships the resolved
// document, and optionally a directory of resources, through the cluster's object
// store; every worker fetches both by digest and builds the topology from the
// document with its own build's component classes.

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gale-stream/gale/component"
	"github.com/gale-stream/gale/flux"
)

// Source says where a topology submitted as a file comes from: its resolved
// document and its resources, each an object of the cluster's object store
// (Prefix-files) named by its SHA-256. A topology registered in Go has none.
type Source struct {
	// File is the file's path as the submitter named it: errors of a worker's
	// build name it (their lines and columns are the resolved document's).
	File string `json:"file"`
	// Digest is the SHA-256 (hex) of the resolved document.
	Digest string `json:"digest"`
	// Resources is the SHA-256 (hex) of the resources' archive (a tar of gale
	// submit --resources DIR), "" without resources.
	Resources string `json:"resources,omitempty"`
}

// Clone returns a copy of s (nil for nil).
func (s *Source) Clone() *Source {
	if s == nil {
		return nil
	}
	c := *s
	return &c
}

// Fingerprint is the short hash the topology's fingerprint carries for the
// source (Fingerprint.Source): the document's digest and the resources', so that
// two submits of different files (or resources) under one name differ. "" for nil.
func (s *Source) Fingerprint() string {
	if s == nil {
		return ""
	}
	sum := sha256.Sum256([]byte("gale source 1\nfile " + s.Digest + "\nresources " + s.Resources + "\n"))
	return hex.EncodeToString(sum[:8])
}

// Digest returns the SHA-256 of b in hex: the name of its object.
func Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Object names in the files bucket.
func documentObject(digest string) string  { return "flux/" + digest + ".yaml" }
func resourcesObject(digest string) string { return "resources/" + digest + ".tar" }

// ErrSourceMissing: a document or resources archive a record names is not in the
// object store (deleted, or the submit did not finish putting it).
var ErrSourceMissing = errors.New("cluster: topology source not in the object store")

// filesBucket binds the cluster's object store, Prefix-files, creating it if
// create (with the topologies bucket's replicas). It is made on the first submit
// of a file, not by Open: a cluster that never runs one does not have it.
func (s *Store) filesBucket(ctx context.Context, create bool) (jetstream.ObjectStore, error) {
	bucket := s.cfg.Prefix + "-files"
	obs, err := s.js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) && create {
		replicas := s.cfg.Replicas
		if replicas == 0 {
			if st, serr := s.topologies.Status(ctx); serr == nil {
				replicas = st.Config().Replicas
			}
		}
		obs, err = s.js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: bucket,
			Description: "gale topology files (resolved) and resources, by SHA-256", Storage: s.cfg.Storage, Replicas: max(replicas, 1)})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = s.js.ObjectStore(ctx, bucket)
		}
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: no bucket %s", ErrSourceMissing, bucket)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: object store %s: %w", bucket, err)
	}
	return obs, nil
}

// PutSource puts a resolved document and a resources archive (nil: none) in the
// object store, unless there already (objects are named by their digest), and
// returns the Source naming them.
func (s *Store) PutSource(ctx context.Context, file string, document, resources []byte) (*Source, error) {
	obs, err := s.filesBucket(ctx, true)
	if err != nil {
		return nil, err
	}
	src := &Source{File: file, Digest: Digest(document)}
	if err := putOnce(ctx, obs, documentObject(src.Digest), document); err != nil {
		return nil, err
	}
	if resources != nil {
		src.Resources = Digest(resources)
		if err := putOnce(ctx, obs, resourcesObject(src.Resources), resources); err != nil {
			return nil, err
		}
	}
	return src, nil
}

func putOnce(ctx context.Context, obs jetstream.ObjectStore, name string, data []byte) error {
	if info, err := obs.GetInfo(ctx, name); err == nil && !info.Deleted && info.Size == uint64(len(data)) {
		return nil
	}
	if _, err := obs.PutBytes(ctx, name, data); err != nil {
		return fmt.Errorf("cluster: putting %s in the object store: %w", name, err)
	}
	return nil
}

// getObject fetches object name and checks its digest against want.
func getObject(ctx context.Context, obs jetstream.ObjectStore, name, want string) ([]byte, error) {
	b, err := obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrSourceMissing, name)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: fetching %s from the object store: %w", name, err)
	}
	if got := Digest(b); got != want {
		return nil, fmt.Errorf("%w: %s has SHA-256 %s", ErrSourceMissing, name, got)
	}
	return b, nil
}

// FetchSource fetches src's resolved document and, if it has resources, unpacks
// them into DIR/TOPOLOGY-DIGEST (DIGEST: the archive's first 16 hex digits), made
// once: an existing one (the same archive, unpacked before) is reused. It returns
// the document and the resources' directory ("" without resources). A missing
// object wraps ErrSourceMissing.
func (s *Store) FetchSource(ctx context.Context, topology string, src *Source, dir string) (document []byte, resources string, err error) {
	obs, err := s.filesBucket(ctx, false)
	if err != nil {
		return nil, "", err
	}
	if document, err = getObject(ctx, obs, documentObject(src.Digest), src.Digest); err != nil {
		return nil, "", err
	}
	if src.Resources == "" {
		return document, "", nil
	}
	if err := checkName("topology", topology); err != nil {
		return nil, "", err
	}
	dest, err := filepath.Abs(filepath.Join(dir, topology+"-"+src.Resources[:min(16, len(src.Resources))]))
	if err != nil {
		return nil, "", err
	}
	if fi, err := os.Stat(dest); err == nil && fi.IsDir() {
		return document, dest, nil
	}
	archive, err := getObject(ctx, obs, resourcesObject(src.Resources), src.Resources)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	// Unpacked beside, then renamed: a directory at dest is always whole.
	tmp, err := os.MkdirTemp(dir, ".unpack-"+topology+"-")
	if err != nil {
		return nil, "", err
	}
	defer os.RemoveAll(tmp)
	if err := Unpack(archive, tmp); err != nil {
		return nil, "", fmt.Errorf("resources %s: %w", src.Resources, err)
	}
	if err := os.Rename(tmp, dest); err != nil {
		if fi, serr := os.Stat(dest); serr == nil && fi.IsDir() {
			return document, dest, nil // another run unpacked it meanwhile
		}
		return nil, "", err
	}
	return document, dest, nil
}

// Pack archives directory dir as gale submit --resources ships it: a tar of its
// regular files and directories, sorted by path, with nothing but names, contents
// and the executable bit (no times, owners), so that one tree always makes the
// same archive and digest. A symbolic link to a file is packed as the file; one
// to a directory, and anything else not a file or a directory, is refused.
func Pack(dir string) ([]byte, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s: not a directory", dir)
	}
	var paths []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return nil, err
		}
		name := filepath.ToSlash(rel)
		fi, err := os.Stat(p) // follows a link
		if err != nil {
			return nil, err
		}
		lfi, err := os.Lstat(p)
		if err != nil {
			return nil, err
		}
		hdr := &tar.Header{Name: name, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		switch {
		case fi.IsDir() && lfi.Mode()&fs.ModeSymlink != 0:
			return nil, fmt.Errorf("%s: a symbolic link to a directory (pack its target instead)", p)
		case fi.IsDir():
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return nil, err
			}
			hdr.Typeflag, hdr.Size, hdr.Mode = tar.TypeReg, int64(len(data)), 0o644
			if fi.Mode()&0o111 != 0 {
				hdr.Mode = 0o755
			}
			if err := tw.WriteHeader(hdr); err != nil {
				return nil, err
			}
			if _, err := tw.Write(data); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: not a regular file or a directory (%v)", p, fi.Mode().Type())
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Unpack unpacks an archive Pack made into directory dest (which must exist). An
// entry whose path is absolute or leaves dest (".."), a link, or anything but a
// file or a directory is refused: the archive comes over the network.
func Unpack(archive []byte, dest string) error {
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		clean := path.Clean(name)
		if name == "" || path.IsAbs(name) || clean != name || clean == ".." || strings.HasPrefix(clean, "../") || strings.Contains(name, "\\") {
			return fmt.Errorf("entry %q: a path outside the resources' directory", hdr.Name)
		}
		target := filepath.Join(dest, filepath.FromSlash(clean))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if hdr.Mode&0o111 != 0 {
				mode = 0o755
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("entry %q: not a file or a directory (type %q)", hdr.Name, hdr.Typeflag)
		}
	}
}

// FileFactory builds topologies submitted as files (Registry.SetFileFactory):
// it parses env.Document (the resolved document, flux.Parse) and builds it with
// the component classes of components (flux.File.Build). A class this build
// lacks is an error naming it at its line and column in the resolved document,
// which the worker gives as its reason to refuse the topology.
func FileFactory(components *component.Registry) Factory {
	return func(ctx context.Context, env Env) (*Deployment, error) {
		if env.Source == nil || env.Document == nil {
			return nil, fmt.Errorf("%w: topology %q: no document to build", ErrConfig, env.Topology)
		}
		if components == nil {
			components = &component.Registry{}
		}
		f, err := flux.Parse(env.Source.File, env.Document)
		if err != nil {
			return nil, fileError(env.Source.File, err)
		}
		if f.Name != env.Topology {
			return nil, fmt.Errorf("file %s names topology %q, submitted as %q", env.Source.File, f.Name, env.Topology)
		}
		// The components' files (a shell component's script) are in the unpacked
		// resources, as Storm's are in the jar's resources/.
		f.Dir = env.Resources
		// Components that keep state keep it in the cluster's JetStream, under the
		// topology's name, so that a task moved to another worker carries on.
		f.Cluster = &component.Cluster{Topology: env.Topology, JS: env.JS, Prefix: env.Prefix, Generation: env.Generation}
		b, err := f.Build(components)
		if err != nil {
			return nil, fileError(env.Source.File, err)
		}
		return &Deployment{Topology: b.Topology, Config: b.Config}, nil
	}
}

// fileError is a refusal of a topology file on one line: a worker's reason shows
// in a row of gale cluster status, and flux joins several refusals with newlines.
func fileError(file string, err error) error {
	return &oneLine{msg: fmt.Sprintf("file %s (lines of its resolved document): %s", file, strings.ReplaceAll(err.Error(), "\n", "; ")), err: err}
}

type oneLine struct {
	msg string
	err error
}

func (e *oneLine) Error() string { return e.msg }
func (e *oneLine) Unwrap() error { return e.err }
