//go:build cgo && linux

// Command cudaalloc allocates device memory through the CUDA driver API (libcuda.so.1, loaded
// with dlopen, so neither nvcc nor the CUDA toolkit is needed) and reports whether it could. The
// real-GPU check (test/gpu/run.sh) runs it as an MPS client with and without
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT to show that the limit holds.
//
// Exit status: 0 allocated; 3 out of memory (CUDA_ERROR_OUT_OF_MEMORY); 4 another CUDA error;
// 5 libcuda.so.1 cannot be loaded; 2 bad usage.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static void *lib;
static CUresult (*p_cuInit)(unsigned int);
static CUresult (*p_cuDeviceGet)(CUdevice *, int);
static CUresult (*p_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
static CUresult (*p_cuCtxSetCurrent)(CUcontext);
static CUresult (*p_cuMemAlloc)(CUdeviceptr *, size_t);
static CUresult (*p_cuMemFree)(CUdeviceptr);
static CUresult (*p_cuMemGetInfo)(size_t *, size_t *);
static CUresult (*p_cuGetErrorName)(CUresult, const char **);

// load returns NULL on success, else why.
static const char *load(void) {
	lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) return dlerror();
	p_cuInit = dlsym(lib, "cuInit");
	p_cuDeviceGet = dlsym(lib, "cuDeviceGet");
	p_cuDevicePrimaryCtxRetain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	p_cuCtxSetCurrent = dlsym(lib, "cuCtxSetCurrent");
	p_cuMemAlloc = dlsym(lib, "cuMemAlloc_v2");
	p_cuMemFree = dlsym(lib, "cuMemFree_v2");
	p_cuMemGetInfo = dlsym(lib, "cuMemGetInfo_v2");
	p_cuGetErrorName = dlsym(lib, "cuGetErrorName");
	if (!p_cuInit || !p_cuDeviceGet || !p_cuDevicePrimaryCtxRetain || !p_cuCtxSetCurrent ||
	    !p_cuMemAlloc || !p_cuMemFree || !p_cuMemGetInfo || !p_cuGetErrorName)
		return "libcuda.so.1 lacks a driver API entry point";
	return NULL;
}

static CUresult cu_init(void) { return p_cuInit(0); }

static CUresult cu_context(int ordinal) {
	CUdevice dev;
	CUcontext ctx;
	CUresult r = p_cuDeviceGet(&dev, ordinal);
	if (r) return r;
	r = p_cuDevicePrimaryCtxRetain(&ctx, dev);
	if (r) return r;
	return p_cuCtxSetCurrent(ctx);
}

static CUresult cu_mem_info(size_t *free_b, size_t *total_b) { return p_cuMemGetInfo(free_b, total_b); }

static CUresult cu_alloc(size_t bytes, CUdeviceptr *ptr) { return p_cuMemAlloc(ptr, bytes); }

static CUresult cu_free(CUdeviceptr ptr) { return p_cuMemFree(ptr); }

static const char *cu_error_name(CUresult r) {
	const char *s = NULL;
	if (p_cuGetErrorName(r, &s) != 0 || s == NULL) return "CUDA_ERROR_UNKNOWN_CODE";
	return s;
}
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
)

const cudaErrorOutOfMemory = 2

func main() {
	mib := flag.Int("mib", 0, "MiB of device memory to allocate in one cuMemAlloc")
	device := flag.Int("device", 0, "CUDA device ordinal")
	probe := flag.Bool("probe", false, "only load libcuda.so.1 and initialise the driver")
	flag.Parse()
	if *mib <= 0 && !*probe {
		fmt.Fprintln(os.Stderr, "usage: cudaalloc -mib N [-device I] | -probe")
		os.Exit(2)
	}
	if why := C.load(); why != nil {
		fmt.Printf("cudaalloc: cannot load libcuda.so.1: %s\n", C.GoString(why))
		os.Exit(5)
	}
	check := func(what string, r C.CUresult) {
		if r != 0 {
			fmt.Printf("cudaalloc: %s: %s\n", what, C.GoString(C.cu_error_name(r)))
			if r == cudaErrorOutOfMemory {
				os.Exit(3)
			}
			os.Exit(4)
		}
	}
	check("cuInit", C.cu_init())
	if *probe {
		fmt.Println("cudaalloc: CUDA driver initialised")
		return
	}
	check("creating a context", C.cu_context(C.int(*device)))
	var free, total C.size_t
	check("cuMemGetInfo", C.cu_mem_info(&free, &total))
	fmt.Printf("cudaalloc: device %d reports %d MiB free of %d MiB\n", *device, uint64(free)>>20, uint64(total)>>20)
	var ptr C.CUdeviceptr
	r := C.cu_alloc(C.size_t(*mib)<<20, &ptr)
	if r == 0 {
		fmt.Printf("cudaalloc: allocated %d MiB\n", *mib)
		C.cu_free(ptr)
		return
	}
	check(fmt.Sprintf("allocating %d MiB", *mib), r)
}
