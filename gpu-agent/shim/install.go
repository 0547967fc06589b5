package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Paths of the delivery. lib/share.c compiles in ContainerDir/ConfigName (shim_test.go checks they
// agree).
const (
	// DefaultHostDir is where the agent keeps the library and each share's files on the node.
	DefaultHostDir = "/var/lib/fairway/share"
	// ContainerDir is where a share's container sees its directory (read-only).
	ContainerDir = "/usr/local/fairway-share"
	// LibraryName is the library's file name, in the agent's image and in ContainerDir.
	LibraryName = "libfairway-share.so"
	// ImageLibrary is the library in the fairway image (Dockerfile), which Install copies out.
	ImageLibrary = "/usr/local/lib/fairway/" + LibraryName
	// ConfigName is the share's configuration in ContainerDir.
	ConfigName = "share.conf"
	// PreloadPath is the dynamic loader's list of libraries to load into every process.
	PreloadPath = "/etc/ld.so.preload"
	// DefaultPipeDirectory is the MPS pipe directory as a share's container sees it (the MPS
	// CSI volume's mount point, where CUDA clients look by default).
	DefaultPipeDirectory = "/tmp/nvidia-mps"
	// DefaultStateFile is the file the container's processes share their use through.
	DefaultStateFile = "/dev/shm/.fairway-share.state"

	preloadName = "ld.so.preload"
	sharesDir   = "shares"
	libDir      = "lib"
)

// Config is one share, as the library reads it from share.conf.
type Config struct {
	// MemoryLimitBytes is the share's memory: the total the container sees and the most its
	// processes may allocate together.
	MemoryLimitBytes int64
	// MPSPipeDirectory, when set, is put into CUDA_MPS_PIPE_DIRECTORY before the driver reads
	// it, and cuInit fails when its control pipe is missing rather than run without MPS.
	MPSPipeDirectory string
	// VisibleDevices, when set, is put into CUDA_VISIBLE_DEVICES before the driver reads it.
	VisibleDevices string
	// StateFile is where the container's processes share their use; DefaultStateFile when
	// empty.
	StateFile string
}

// Validate names the first field that the library could not use.
func (c Config) Validate() error {
	if c.MemoryLimitBytes <= 0 {
		return fmt.Errorf("share config: MemoryLimitBytes is %d: want the share's memory in bytes, above 0", c.MemoryLimitBytes)
	}
	for name, v := range map[string]string{"MPSPipeDirectory": c.MPSPipeDirectory, "StateFile": c.StateFile} {
		if v != "" && !filepath.IsAbs(v) {
			return fmt.Errorf("share config: %s %q: want an absolute path in the container", name, v)
		}
	}
	for name, v := range map[string]string{"MPSPipeDirectory": c.MPSPipeDirectory, "VisibleDevices": c.VisibleDevices, "StateFile": c.StateFile} {
		if strings.ContainsAny(v, "\n\r=") || len(v) > 250 {
			return fmt.Errorf("share config: %s %q: want one line without '=', at most 250 bytes", name, v)
		}
	}
	return nil
}

// Marshal is share.conf's text.
func (c Config) Marshal() []byte {
	var b strings.Builder
	b.WriteString("# written by the fairway gpu-agent for one GPU share; read by " + LibraryName + "\n")
	b.WriteString("memory_limit_bytes=" + strconv.FormatInt(c.MemoryLimitBytes, 10) + "\n")
	if c.MPSPipeDirectory != "" {
		b.WriteString("mps_pipe_directory=" + c.MPSPipeDirectory + "\n")
	}
	if c.VisibleDevices != "" {
		b.WriteString("visible_devices=" + c.VisibleDevices + "\n")
	}
	state := c.StateFile
	if state == "" {
		state = DefaultStateFile
	}
	b.WriteString("state=" + state + "\n")
	return []byte(b.String())
}

// Install copies the library (ImageLibrary in the agent's container) to hostDir and writes the
// preload file that names it as share containers see it. The agent calls it once at start.
func Install(hostDir, library string) error {
	if err := os.MkdirAll(filepath.Join(hostDir, libDir), 0o755); err != nil {
		return fmt.Errorf("installing the share library: %w", err)
	}
	if err := copyFile(library, filepath.Join(hostDir, libDir, LibraryName), 0o644); err != nil {
		return fmt.Errorf("installing the share library: %w", err)
	}
	preload := filepath.Join(ContainerDir, LibraryName) + "\n"
	if err := writeFile(filepath.Join(hostDir, preloadName), []byte(preload), 0o644); err != nil {
		return fmt.Errorf("installing the share library's preload file: %w", err)
	}
	return nil
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Prepare writes share id's directory (the library and its share.conf) under hostDir and
// returns the mounts the device plugin's Allocate answers for the share's container. id names
// the allocation (the device ID the kubelet allocated, say); Install must have run.
func Prepare(hostDir, id string, c Config) ([]*pluginapi.Mount, error) {
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("share id %q: want 1 to 128 of [A-Za-z0-9._-], not starting with . - or _", id)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	dir := filepath.Join(hostDir, sharesDir, id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("preparing share %s: %w", id, err)
	}
	lib := filepath.Join(dir, LibraryName)
	if err := os.Remove(lib); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("preparing share %s: %w", id, err)
	}
	// A hard link where the file system allows (no copy per share), a copy where not.
	installed := filepath.Join(hostDir, libDir, LibraryName)
	if err := os.Link(installed, lib); err != nil {
		if err := copyFile(installed, lib, 0o644); err != nil {
			return nil, fmt.Errorf("preparing share %s (has Install run?): %w", id, err)
		}
	}
	if err := writeFile(filepath.Join(dir, ConfigName), c.Marshal(), 0o644); err != nil {
		return nil, fmt.Errorf("preparing share %s: %w", id, err)
	}
	return []*pluginapi.Mount{
		{HostPath: dir, ContainerPath: ContainerDir, ReadOnly: true},
		{HostPath: filepath.Join(hostDir, preloadName), ContainerPath: PreloadPath, ReadOnly: true},
	}, nil
}

// Remove deletes share id's directory once its container is gone.
func Remove(hostDir, id string) error {
	if !idPattern.MatchString(id) {
		return fmt.Errorf("share id %q: want 1 to 128 of [A-Za-z0-9._-]", id)
	}
	if err := os.RemoveAll(filepath.Join(hostDir, sharesDir, id)); err != nil {
		return fmt.Errorf("removing share %s: %w", id, err)
	}
	return nil
}

// writeFile replaces path atomically, so a container starting meanwhile reads the old or the new
// file, never half of one.
func writeFile(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; cleanup on failure only
	if _, err := tmp.Write(data); err != nil {
		tmp.Close() // the write's error is the one to report
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close() // the chmod's error is the one to report
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close() // read-only
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	return writeFile(dst, data, mode)
}
