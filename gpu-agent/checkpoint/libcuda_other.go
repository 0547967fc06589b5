//go:build !cgo || !linux

package checkpoint

import "fmt"

// Open says ErrNotAvailable: the driver's checkpoint API is loaded with dlopen through cgo, on
// Linux only.
func Open() (API, error) {
	return nil, fmt.Errorf("%w: this fairway was built without cgo or not for Linux", ErrNotAvailable)
}
