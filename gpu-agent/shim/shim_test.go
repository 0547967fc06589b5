package shim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// built holds what gcc made once for all tests: the shim, the mock driver libraries and the
// client, in one directory.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// build compiles lib/share.c and testdata/ with gcc alone: no NVIDIA software anywhere. A
// machine without gcc fails the tests; the shim is part of what fairway ships.
func build(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "fairway-shim-test-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		steps := [][]string{
			{"-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", "-o", filepath.Join(dir, LibraryName), "lib/share.c", "-ldl", "-lpthread"},
			{"-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o", filepath.Join(dir, "libcuda.so.1"), "testdata/mockcuda.c"},
			{"-O1", "-Wall", "-Werror", "-shared", "-fPIC", "-o", filepath.Join(dir, "libnvidia-ml.so.1"), "testdata/mocknvml.c"},
			{"-O1", "-Wall", "-Werror", "-o", filepath.Join(dir, "sharetest"), "testdata/sharetest.c", "-ldl"},
			{"-O1", "-Wall", "-Werror", "-DDIRECT", "-o", filepath.Join(dir, "sharetest-direct"), "testdata/sharetest.c",
				"-L" + dir, "-l:libcuda.so.1", "-l:libnvidia-ml.so.1", "-ldl"},
		}
		for _, args := range steps {
			if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				built.err = fmt.Errorf("gcc %s: %w\n%s", strings.Join(args, " "), err, out)
				return
			}
		}
	})
	if built.err != nil {
		t.Fatalf("building the shim and its mocks: %v", built.err)
	}
	return built.dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir) // a temporary directory
	}
	os.Exit(code)
}

// share is one share's container as the tests run it: its share.conf, its state file and an MPS
// pipe directory with a control pipe.
type share struct {
	t    *testing.T
	bin  string
	conf string
	pipe string
}

func newShare(t *testing.T, limitMiB int64) *share {
	bin := build(t)
	dir := t.TempDir()
	s := &share{t: t, bin: bin, conf: filepath.Join(dir, ConfigName), pipe: filepath.Join(dir, "pipe")}
	if err := os.Mkdir(s.pipe, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.pipe, "control"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{MemoryLimitBytes: limitMiB << 20, MPSPipeDirectory: s.pipe, VisibleDevices: "GPU-share", StateFile: filepath.Join(dir, "state")}
	if err := os.WriteFile(s.conf, c.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	return s
}

// cmd is the client in mode running steps, with the shim preloaded unless preload is false.
func (s *share) cmd(mode string, preload bool, steps ...string) *exec.Cmd {
	prog := filepath.Join(s.bin, "sharetest")
	if mode == "direct" {
		prog += "-direct"
	}
	c := exec.Command(prog, append([]string{mode}, steps...)...)
	c.Env = []string{"LD_LIBRARY_PATH=" + s.bin, "FAIRWAY_SHARE_CONFIG=" + s.conf,
		// What a tenant might set: the shim puts the share's values back.
		"CUDA_MPS_PIPE_DIRECTORY=/somewhere/else", "CUDA_VISIBLE_DEVICES=0,1,2,3"}
	if preload {
		c.Env = append(c.Env, "LD_PRELOAD="+filepath.Join(s.bin, LibraryName))
	}
	return c
}

func (s *share) run(mode string, preload bool, steps ...string) []string {
	s.t.Helper()
	out, err := s.cmd(mode, preload, steps...).CombinedOutput()
	if err != nil {
		s.t.Fatalf("sharetest %s %v: %v\n%s", mode, steps, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

func expect(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var modes = []string{"direct", "dlsym", "procaddr"}

func TestSharesMemoryIsWhatTheContainerSees(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			s := newShare(t, 4096)
			// The mock GPU without the shim: 80 GiB, 30 GiB used by neighbours in NVML.
			expect(t, s.run(mode, false, "init", "info", "devtotal", "nvml", "nvml2"),
				"init 0", "info free=81920 total=81920 r=0", "devtotal 81920",
				"nvml total=81920 used=30720 free=51200 r=0", "nvml2 total=81920 used=30720 free=50688 reserved=512 r=0")
			// With it: the share is the GPU, the container's own use is the used memory.
			expect(t, s.run(mode, true, "init", "info", "devtotal", "nvml", "nvml2", "alloc:1000", "info", "nvml", "nvml2", "free", "info", "nvml"),
				"init 0", "info free=4096 total=4096 r=0", "devtotal 4096",
				"nvml total=4096 used=0 free=4096 r=0", "nvml2 total=4096 used=0 free=4096 reserved=0 r=0",
				"alloc 1000 0", "info free=3096 total=4096 r=0",
				"nvml total=4096 used=1000 free=3096 r=0", "nvml2 total=4096 used=1000 free=3096 reserved=0 r=0",
				"free 0", "info free=4096 total=4096 r=0", "nvml total=4096 used=0 free=4096 r=0")
		})
	}
}

func TestAllocationsPastTheShareFail(t *testing.T) {
	kinds := []string{"alloc", "pitch", "managed", "async", "async_ptsz", "pool", "create", "array", "array3d"}
	for _, mode := range modes {
		for _, kind := range kinds {
			t.Run(mode+"/"+kind, func(t *testing.T) {
				s := newShare(t, 2048)
				// Within the share it reaches the driver; past it, it fails as the driver would
				// when out of memory (CUDA_ERROR_OUT_OF_MEMORY = 2) and never reaches it; freed,
				// the memory can be taken again.
				expect(t, s.run(mode, true, "init", kind+":1500", kind+":600", "calls", kind+":548", "info", "free", "free", kind+":2048", "info", kind+":1", "calls"),
					"init 0", kind+" 1500 0", kind+" 600 2", "calls 1", kind+" 548 0", "info free=0 total=2048 r=0",
					"free 0", "free 0", kind+" 2048 0", "info free=0 total=2048 r=0", kind+" 1 2", "calls 3")
			})
		}
	}
}

// The share is the container's, not each process's: what one process holds, the others see as
// used and cannot take; when it exits, its memory is the share's again.
func TestTheShareIsTheContainers(t *testing.T) {
	s := newShare(t, 4096)
	holder := s.cmd("procaddr", true, "init", "alloc:3000", "hold")
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() }) // cleanup of a process that may have exited
	lines := bufio.NewScanner(stdout)
	var seen []string
	for lines.Scan() && lines.Text() != "holding" {
		seen = append(seen, lines.Text())
	}
	expect(t, seen, "init 0", "alloc 3000 0")

	for _, mode := range modes {
		expect(t, s.run(mode, true, "init", "info", "nvml", "alloc:1200", "alloc:1096", "info"),
			"init 0", "info free=1096 total=4096 r=0", "nvml total=4096 used=3000 free=1096 r=0",
			"alloc 1200 2", "alloc 1096 0", "info free=0 total=4096 r=0")
	}
	// nvidia-smi is a process of its own that allocates nothing: it sees the holder's use.
	expect(t, s.run("dlsym", true, "nvml2"), "nvml2 total=4096 used=3000 free=1096 reserved=0 r=0")

	stdin.Close()                      // the holder exits when its stdin closes
	_, _ = io.Copy(io.Discard, stdout) // drain until exit
	if err := holder.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	expect(t, s.run("dlsym", true, "init", "info", "alloc:4096"), "init 0", "info free=4096 total=4096 r=0", "alloc 4096 0")
}

// The share's MPS pipe directory and device are put back whatever the process set, and without
// the control pipe the driver is not initialised at all: a context outside MPS would be outside
// the server's limit.
func TestMPSIsNotBypassedThroughTheEnvironment(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) {
			s := newShare(t, 4096)
			expect(t, s.run(mode, true, "init", "env"), "init 0", "env pipe="+s.pipe+" visible=GPU-share")
			expect(t, s.run(mode, false, "init", "env"), "init 0", "env pipe=/somewhere/else visible=0,1,2,3")
			if err := os.Remove(filepath.Join(s.pipe, "control")); err != nil {
				t.Fatal(err)
			}
			// CUDA_ERROR_NO_DEVICE (100), and the driver's cuInit never ran.
			expect(t, s.run(mode, true, "init", "env"), "init 100", "env") // the mock's env is empty: its cuInit never ran
		})
	}
}

// Loaded where no share is configured (a process outside a share's container), the library
// changes nothing.
func TestWithoutAShareNothingChanges(t *testing.T) {
	s := newShare(t, 4096)
	if err := os.Remove(s.conf); err != nil {
		t.Fatal(err)
	}
	for _, mode := range modes {
		expect(t, s.run(mode, true, "init", "env", "info", "nvml", "alloc:8192", "calls"),
			"init 0", "env pipe=/somewhere/else visible=0,1,2,3", "info free=81920 total=81920 r=0",
			"nvml total=81920 used=30720 free=51200 r=0", "alloc 8192 0", "calls 1")
	}
}

func TestConfigPathAgreesWithTheLibrary(t *testing.T) {
	src, err := os.ReadFile("lib/share.c")
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"FAIRWAY_SHARE_CONFIG_PATH":   filepath.Join(ContainerDir, ConfigName),
		"FAIRWAY_SHARE_DEFAULT_STATE": DefaultStateFile,
	} {
		m := regexp.MustCompile(`#define ` + name + ` "([^"]*)"`).FindSubmatch(src)
		if m == nil || string(m[1]) != want {
			t.Errorf("lib/share.c's %s is %q, install.go says %q", name, m, want)
		}
	}
}

func TestPrepare(t *testing.T) {
	host := t.TempDir()
	lib := filepath.Join(t.TempDir(), LibraryName)
	if err := os.WriteFile(lib, []byte("ELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Install(host, lib); err != nil {
		t.Fatal(err)
	}
	c := Config{MemoryLimitBytes: 24 << 30, MPSPipeDirectory: DefaultPipeDirectory, VisibleDevices: "GPU-1234"}
	mounts, err := Prepare(host, "share-0", c)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(host, "shares", "share-0")
	got := []string{}
	for _, m := range mounts {
		got = append(got, fmt.Sprintf("%s -> %s ro=%v", m.HostPath, m.ContainerPath, m.ReadOnly))
	}
	expect(t, got, dir+" -> "+ContainerDir+" ro=true", filepath.Join(host, "ld.so.preload")+" -> /etc/ld.so.preload ro=true")
	for path, want := range map[string]string{
		filepath.Join(host, "ld.so.preload"): "/usr/local/fairway-share/libfairway-share.so\n",
		filepath.Join(dir, LibraryName):      "ELF",
		filepath.Join(dir, ConfigName): "# written by the fairway gpu-agent for one GPU share; read by libfairway-share.so\n" +
			"memory_limit_bytes=25769803776\nmps_pipe_directory=/tmp/nvidia-mps\nvisible_devices=GPU-1234\nstate=/dev/shm/.fairway-share.state\n",
	} {
		b, err := os.ReadFile(path)
		if err != nil || string(b) != want {
			t.Errorf("%s: %q (%v), want %q", path, b, err, want)
		}
	}
	if err := Remove(host, "share-0"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("share directory left after Remove: %v", err)
	}

	for _, tc := range []struct {
		id   string
		c    Config
		want string
	}{
		{"../x", c, `share id "../x": want 1 to 128`},
		{"a", Config{}, "MemoryLimitBytes is 0"},
		{"a", Config{MemoryLimitBytes: 1, MPSPipeDirectory: "tmp/mps"}, `MPSPipeDirectory "tmp/mps": want an absolute path`},
		{"a", Config{MemoryLimitBytes: 1, VisibleDevices: "GPU-1\nmemory_limit_bytes=9"}, `VisibleDevices "GPU-1\nmemory_limit_bytes=9": want one line`},
	} {
		if _, err := Prepare(host, tc.id, tc.c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Prepare(%q, %+v): %v, want an error with %q", tc.id, tc.c, err, tc.want)
		}
	}
}
