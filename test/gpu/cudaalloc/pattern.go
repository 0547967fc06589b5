//go:build cgo && linux

package main

// #include <stddef.h>
// typedef int CUresult;
// typedef unsigned long long CUdeviceptr;
// CUresult cu_htod(CUdeviceptr dst, const void *src, size_t n);
// CUresult cu_dtoh(void *dst, CUdeviceptr src, size_t n);
// const char *cu_error_name(CUresult r);
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// The swap check's owner (a notebook with a model loaded): its memory holds a known pattern,
// written once; after each swap-out and restore it reads all of it back and compares. Word i of
// MiB block b is base[i] ^ b*golden: cheap to check in parallel, and no two blocks alike, so a
// block restored to the wrong place shows.
const (
	block    = 1 << 20
	copySize = 256 << 20 // bytes per host-device copy
	golden   = 0x9e3779b97f4a7c15
)

var base = func() []uint64 {
	b := make([]uint64, block/8)
	x := uint64(0x2545f4914f6cdd1d)
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = x
	}
	return b
}()

// fill writes the pattern of the blocks of buf, which start at byte offset off of the memory.
func fill(buf []byte, off uint64) {
	parallelBlocks(buf, off, func(words []uint64, b uint64) bool {
		k := b * golden
		for i := range words {
			words[i] = base[i] ^ k
		}
		return true
	})
}

// check reports the first byte offset of buf (at off) that differs from the pattern, or -1.
func check(buf []byte, off uint64) int64 {
	bad := int64(-1)
	var mu sync.Mutex
	parallelBlocks(buf, off, func(words []uint64, b uint64) bool {
		k := b * golden
		for i := range words {
			if words[i] != base[i]^k {
				mu.Lock()
				if at := int64(b*block + uint64(i)*8); bad < 0 || at < bad {
					bad = at
				}
				mu.Unlock()
				return false
			}
		}
		return true
	})
	return bad
}

// parallelBlocks runs f on each MiB block of buf, on all CPUs (the CUDA calls stay on the
// main thread; these goroutines only touch host memory).
func parallelBlocks(buf []byte, off uint64, f func(words []uint64, b uint64) bool) {
	n := len(buf) / block
	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				words := unsafe.Slice((*uint64)(unsafe.Pointer(&buf[i*block])), block/8)
				f(words, off/block+uint64(i))
			}
		}()
	}
	wg.Wait()
}

func cuErr(r C.CUresult) string { return C.GoString(C.cu_error_name(r)) }

// owner fills size bytes at ptr with the pattern, then cycles times: idles until SIGUSR1, and
// reads everything back and checks it. Its first CUDA call after SIGUSR1 blocks while the agent
// holds it swapped out; the line says when it touched the GPU and when the check ended.
func owner(ptr C.CUdeviceptr, size uint64, cycles int, start chan os.Signal, idleFor time.Duration) int {
	size &^= block - 1
	buf := make([]byte, copySize)
	var copying time.Duration
	for off := uint64(0); off < size; off += copySize {
		n := min(copySize, size-off)
		fill(buf[:n], off)
		began := time.Now()
		if r := C.cu_htod(ptr+C.CUdeviceptr(off), unsafe.Pointer(&buf[0]), C.size_t(n)); r != 0 {
			fmt.Printf("cudaalloc: writing the pattern: %s\n", cuErr(r))
			return 4
		}
		copying += time.Since(began)
	}
	// The time of the host-to-device copies alone: the rate of this host-device link (from
	// pageable memory), the bound a restore is measured against.
	fmt.Printf("cudaalloc: pattern written, %d bytes, copies took %d us\n", size, copying.Microseconds())
	for c := 1; c <= cycles; c++ {
		fmt.Println("cudaalloc: idle; SIGUSR1 starts the work")
		select {
		case <-start:
		case <-time.After(idleFor):
			fmt.Printf("cudaalloc: no SIGUSR1 within %s; giving up\n", idleFor)
			return 6
		}
		// A cell's Python runs before its first CUDA call: the pattern of the first copy is
		// made again here, on the CPU, as a cell would compute before touching the GPU.
		fill(buf[:min(copySize, size)], 0)
		touched := time.Now()
		for off := uint64(0); off < size; off += copySize {
			n := min(copySize, size-off)
			if r := C.cu_dtoh(unsafe.Pointer(&buf[0]), ptr+C.CUdeviceptr(off), C.size_t(n)); r != 0 {
				fmt.Printf("cudaalloc: reading the pattern back: %s\n", cuErr(r))
				return 4
			}
			if at := check(buf[:n], off); at >= 0 {
				fmt.Printf("cudaalloc: MISMATCH in cycle %d at byte %d of %d\n", c, off+uint64(at), size)
				return 7
			}
		}
		fmt.Printf("cudaalloc: verified %d bytes, cycle %d, touched %d done %d\n", size, c, touched.UnixMicro(), time.Now().UnixMicro())
	}
	return 0
}
