package gpushare

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// SlotKey names one GPU slot of a node.
type SlotKey struct {
	Node string
	Slot int
}

// String is node/slot.
func (k SlotKey) String() string { return k.Node + "/" + strconv.Itoa(k.Slot) }

// ReservationName is the deterministic name of the reservation pod of a slot:
// fairway-gpu-<node>-<slot>, shortened with a hash when the node's name is long.
func ReservationName(k SlotKey) string {
	name := "fairway-gpu-" + k.Node + "-" + strconv.Itoa(k.Slot)
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	return shorten(name, validation.DNS1123SubdomainMaxLength)
}

// GroupID is the fairway.dev/gpu-group label value of a slot: <node>-<slot>, shortened with a
// hash to fit a label value.
func GroupID(k SlotKey) string {
	id := k.Node + "-" + strconv.Itoa(k.Slot)
	if len(id) <= validation.LabelValueMaxLength {
		return id
	}
	return shorten(id, validation.LabelValueMaxLength)
}

// shorten keeps a prefix of s and appends a hash of all of s, within max bytes.
func shorten(s string, max int) string {
	sum := sha256.Sum256([]byte(s))
	h := hex.EncodeToString(sum[:])[:10]
	prefix := strings.TrimRight(s[:max-len(h)-1], "-.")
	return prefix + "-" + h
}
