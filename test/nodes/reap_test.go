package nodes

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

func TestOwnerGone(t *testing.T) {
	self, ok := processToken(os.Getpid())
	if !ok || self != ownerToken {
		t.Fatalf("processToken(self) = %q, %v; ownerToken %q", self, ok, ownerToken)
	}
	if ownerGone(self) {
		t.Errorf("ownerGone(%q), this process: gone", self)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := strconv.Itoa(cmd.Process.Pid) + "-1"
	if !ownerGone(dead) {
		t.Errorf("ownerGone(%q), a reaped child: alive", dead)
	}
	pid, start, _ := strings.Cut(self, "-")
	recycled := pid + "-" + start + "0"
	if !ownerGone(recycled) {
		t.Errorf("ownerGone(%q), this process id with another start time: alive", recycled)
	}
	for _, foreign := range []string{"", "x", "abc-1", "0-1", "-1-5", strconv.Itoa(os.Getpid())} {
		if ownerGone(foreign) {
			t.Errorf("ownerGone(%q), a label this package does not write: gone", foreign)
		}
	}
}
