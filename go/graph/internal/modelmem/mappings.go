package modelmem

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// Mappings owns the read-only mappings (or, where mmap is refused, the copies) of the
// external data files of one model, each file opened once.
type Mappings struct {
	mu     sync.Mutex
	dir    string
	files  map[string][]byte
	mapped map[string]bool
	closed bool
}

// NewMappings makes the Mappings of a model in directory dir ("": a model with no directory,
// whose external data Bytes refuses).
func NewMappings(dir string) *Mappings {
	return &Mappings{dir: dir, files: map[string][]byte{}, mapped: map[string]bool{}}
}

// resolveExternal checks that location names a file inside dir and returns its path. Absolute
// paths, ".." components and symlinks leading out of dir are refused.
func resolveExternal(dir, location string) (string, error) {
	if location == "" {
		return "", errors.New("external data has no location")
	}
	if strings.ContainsRune(location, 0) {
		return "", fmt.Errorf("external data location %q contains NUL", location)
	}
	if filepath.IsAbs(location) || strings.HasPrefix(location, "/") || strings.HasPrefix(location, `\`) {
		return "", fmt.Errorf("external data location %q is absolute", location)
	}
	clean := filepath.Clean(filepath.FromSlash(location))
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) || clean == "." {
		return "", fmt.Errorf("external data location %q escapes the model directory", location)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", fmt.Errorf("model directory: %w", err)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(root, clean))
	if err != nil {
		return "", fmt.Errorf("external data %q: %w", location, err)
	}
	rel, err := filepath.Rel(root, full)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("external data location %q escapes the model directory", location)
	}
	return full, nil
}

// Bytes returns length bytes at offset of the external file named by location (length -1: to
// the end of the file).
func (m *Mappings) Bytes(location string, offset, length int64) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("model is closed")
	}
	if m.dir == "" {
		return nil, fmt.Errorf("external data %q needs a model directory (use Load or LoadOptions.Dir)", location)
	}
	path, err := resolveExternal(m.dir, location)
	if err != nil {
		return nil, err
	}
	data, ok := m.files[path]
	if !ok {
		data, err = m.open(path)
		if err != nil {
			return nil, fmt.Errorf("external data %q: %w", location, err)
		}
	}
	size := int64(len(data))
	if offset < 0 || offset > size {
		return nil, fmt.Errorf("external data %q: offset %d outside the file's %d bytes", location, offset, size)
	}
	if length < 0 {
		length = size - offset
	}
	if length > size-offset {
		return nil, fmt.Errorf("external data %q: %d bytes at offset %d run past the file's %d bytes", location, length, offset, size)
	}
	return data[offset : offset+length : offset+length], nil
}

func (m *Mappings) open(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	size := st.Size()
	var data []byte
	if size > 0 {
		data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
		if err == nil {
			m.mapped[path] = true
		} else {
			// Some filesystems refuse mmap; fall back to reading the file.
			data, err = os.ReadFile(path)
			if err != nil {
				return nil, err
			}
		}
	}
	m.files[path] = data
	return data, nil
}

// Close unmaps the files; the bytes Bytes returned must not be used afterwards. Idempotent.
func (m *Mappings) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for path, data := range m.files {
		if m.mapped[path] {
			if err := syscall.Munmap(data); err != nil {
				errs = append(errs, fmt.Errorf("unmap %s: %w", path, err))
			}
		}
	}
	m.files = nil
	return errors.Join(errs...)
}
