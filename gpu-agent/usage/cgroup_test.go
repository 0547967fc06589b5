package usage

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPodUIDFromCgroup(t *testing.T) {
	const uid = "0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c"
	cases := map[string]struct {
		content string
		want    string
		ok      bool
	}{
		"v2 systemd burstable": {
			content: "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/cri-containerd-5f2a.scope\n",
			want:    uid, ok: true,
		},
		"v2 systemd besteffort": {
			content: "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/crio-1234.scope\n",
			want:    uid, ok: true,
		},
		"v2 systemd guaranteed": {
			content: "0::/kubepods.slice/kubepods-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/cri-containerd-77.scope\n",
			want:    uid, ok: true,
		},
		"v2 cgroupfs": {
			content: "0::/kubepods/burstable/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c/9a8b7c\n",
			want:    uid, ok: true,
		},
		"v2 seen from another cgroup namespace": {
			content: "0::/../../kubepods-besteffort-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/cri-containerd-1.scope\n",
			want:    uid, ok: true,
		},
		"v1 cgroupfs besteffort": {
			content: "12:pids:/kubepods/besteffort/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c/abcdef\n" +
				"11:memory:/kubepods/besteffort/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c/abcdef\n" +
				"1:name=systemd:/kubepods/besteffort/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c/abcdef\n",
			want: uid, ok: true,
		},
		"v1 guaranteed": {
			content: "4:devices:/kubepods/pod0C9D1C1A-3C5E-4B51-A1F0-2A4A5F1E0B7C/abcdef\n",
			want:    uid, ok: true,
		},
		"v1 systemd": {
			content: "10:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0c9d1c1a_3c5e_4b51_a1f0_2a4a5f1e0b7c.slice/docker-0123.scope\n",
			want:    uid, ok: true,
		},
		"host process": {
			content: "0::/system.slice/sshd.service\n",
		},
		"v1 host process": {
			content: "12:pids:/user.slice/user-1000.slice\n1:name=systemd:/init.scope\n",
		},
		"pod-like text outside kubepods": {
			content: "0::/system.slice/pod0c9d1c1a-3c5e-4b51-a1f0-2a4a5f1e0b7c.service\n",
		},
		"empty": {},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := PodUIDFromCgroup(tc.content)
			if got != tc.want || ok != tc.ok {
				t.Errorf("PodUIDFromCgroup = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestProcResolver(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	content := "0::/kubepods/besteffort/pod11111111-2222-3333-4444-555555555555/c1\n"
	if err := os.WriteFile(filepath.Join(root, "4242", "cgroup"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	r := ProcResolver{Root: root}
	if uid, ok := r.PodUID(4242); !ok || uid != "11111111-2222-3333-4444-555555555555" {
		t.Errorf("PodUID(4242) = %q, %v", uid, ok)
	}
	if _, ok := r.PodUID(1); ok {
		t.Error("PodUID of a missing process resolved")
	}
	table := PodResolverFunc(func(pid uint32) (string, bool) { return "fake", pid == 7 })
	chain := FirstResolver{table, r}
	if uid, _ := chain.PodUID(7); uid != "fake" {
		t.Errorf("chain PodUID(7) = %q", uid)
	}
	if uid, _ := chain.PodUID(4242); uid != "11111111-2222-3333-4444-555555555555" {
		t.Errorf("chain PodUID(4242) = %q", uid)
	}
}
