package gpu

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Fakes for run.sh: they behave like the real binaries as far as the script can tell.
const (
	fakeFairway = `#!/bin/sh
case "$1 $2" in
"agent discover")
  if [ -n "$FAKE_NO_DRIVER" ]; then
    echo "error: initialising NVML: nvmlInit: ERROR_LIBRARY_NOT_FOUND: libnvidia-ml.so.1 is not loadable here" >&2
    exit 1
  fi
  printf '{\n  "inventory": {\n    "gpus": [\n      {\n        "index": 0,\n        "uuid": "GPU-0000",\n        "memoryMiB": 144384,\n        "healthy": true\n      }\n    ]\n  }\n}\n'
  ;;
"agent mps")
  pipe=$4
  mkdir -p "$pipe"
  touch "$pipe/control"
  trap 'rm -f "$pipe/control"; exit 0' TERM
  while :; do sleep 0.05; done
  ;;
esac
`
	// The fake CUDA client enforces CUDA_MPS_PINNED_DEVICE_MEM_LIMIT (device 0, in G) unless
	// FAKE_NOT_ENFORCED is set.
	fakeCudaalloc = `#!/bin/sh
[ "$1" = "-probe" ] && exit 0
mib=$2
limit=${CUDA_MPS_PINNED_DEVICE_MEM_LIMIT#0=}
limit=${limit%G}
if [ -n "$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" ] && [ -z "$FAKE_NOT_ENFORCED" ] && [ "$mib" -gt $((limit * 1024)) ]; then
  echo "cudaalloc: allocating $mib MiB: CUDA_ERROR_OUT_OF_MEMORY"; exit 3
fi
echo "cudaalloc: allocated $mib MiB"
`
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestRunScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script, err := filepath.Abs("run.sh")
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		binaries bool
		mps      bool
		env      []string
		wantExit int
		want     []string
	}{
		"everything passes": {
			binaries: true, mps: true, wantExit: 0,
			want: []string{"PASS: discovery: 1 GPU(s)", "PASS: control: without a limit", "PASS: a client limited to 2048 MiB allocates 1024 MiB",
				"PASS: a client limited to 2048 MiB cannot allocate 2560 MiB", "PASS: MPS control daemon stopped", "RESULT: PASSED"},
		},
		"limit not enforced fails": {
			binaries: true, mps: true, env: []string{"FAKE_NOT_ENFORCED=1"}, wantExit: 1,
			want: []string{"FAIL: a client limited to 2048 MiB allocated 2560 MiB: the MPS memory limit is NOT enforced", "RESULT: FAILED"},
		},
		"no driver and no MPS is skipped, not passed": {
			binaries: true, env: []string{"FAKE_NO_DRIVER=1"}, wantExit: 2,
			want: []string{"SKIPPED: discovery: no usable NVIDIA driver here", "SKIPPED: MPS isolation: nvidia-cuda-mps-control not found", "RESULT: INCOMPLETE"},
		},
		"no binaries and no Go": {
			wantExit: 2,
			want:     []string{"SKIPPED: everything: no fairway/cudaalloc", "RESULT: INCOMPLETE"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			bin, path := filepath.Join(dir, "bin"), filepath.Join(dir, "path")
			for _, d := range []string{bin, path} {
				if err := os.Mkdir(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.binaries {
				write(t, filepath.Join(bin, "fairway"), fakeFairway)
				write(t, filepath.Join(bin, "cudaalloc"), fakeCudaalloc)
			}
			if tc.mps {
				write(t, filepath.Join(path, "nvidia-cuda-mps-control"), "#!/bin/sh\nexit 0\n")
			}
			cmd := exec.Command("bash", script, bin)
			// No Go, no NVIDIA tools: only the fakes and the base system.
			cmd.Env = append([]string{"PATH=" + path + ":/usr/bin:/bin", "TMPDIR=" + dir}, tc.env...)
			out, _ := cmd.CombinedOutput()
			if got := cmd.ProcessState.ExitCode(); got != tc.wantExit {
				t.Errorf("exit %d, want %d; output:\n%s", got, tc.wantExit, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
