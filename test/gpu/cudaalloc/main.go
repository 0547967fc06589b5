//go:build cgo && linux

// Command cudaalloc allocates device memory through the CUDA driver API (libcuda.so.1, loaded
// with dlopen, so neither nvcc nor the CUDA toolkit is needed) and reports whether it could. The
// real-GPU check (test/gpu/run.sh) runs it as an MPS client with and without
// CUDA_MPS_PINNED_DEVICE_MEM_LIMIT to show that the limit holds.
//
// For the lending check it also works: with -work it runs a kernel over its memory for that
// long and prints its throughput per window ("cudaalloc: rate <start_us> <end_us> <iterations>
// <per_second>", times in Unix microseconds). The kernel is PTX text the driver compiles
// (cuModuleLoadData), so it still needs no toolkit; should the driver refuse it, cuMemsetD32
// does the work instead. With -idle it holds its memory and waits for SIGUSR1 before working
// (an idle notebook); with -leave it takes all the free memory but that many MiB (a loan).
//
// Exit status: 0 allocated (and worked); 3 out of memory (CUDA_ERROR_OUT_OF_MEMORY); 4 another
// CUDA error; 5 libcuda.so.1 cannot be loaded; 6 idle and never told to work; 2 bad usage.
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
static CUresult (*p_cuModuleLoadData)(void **, const void *);
static CUresult (*p_cuModuleGetFunction)(void **, void *, const char *);
static CUresult (*p_cuLaunchKernel)(void *, unsigned int, unsigned int, unsigned int, unsigned int,
	unsigned int, unsigned int, unsigned int, void *, void **, void **);
static CUresult (*p_cuCtxSynchronize)(void);
static CUresult (*p_cuMemsetD32)(CUdeviceptr, unsigned int, size_t);
static CUresult (*p_cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
static CUresult (*p_cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
static void *touch_fn;

// touch_ptx adds one to every 32-bit word of a buffer, with a grid-stride loop: memory-bound
// work on the SMs, which NVML's per-process utilization sees.
static const char touch_ptx[] =
	".version 6.0\n"
	".target sm_50\n"
	".address_size 64\n"
	"\n"
	".visible .entry touch(\n"
	"	.param .u64 touch_param_0,\n"
	"	.param .u64 touch_param_1\n"
	")\n"
	"{\n"
	"	.reg .pred 	%p<2>;\n"
	"	.reg .b32 	%r<8>;\n"
	"	.reg .b64 	%rd<8>;\n"
	"\n"
	"	ld.param.u64 	%rd1, [touch_param_0];\n"
	"	ld.param.u64 	%rd2, [touch_param_1];\n"
	"	cvta.to.global.u64 	%rd3, %rd1;\n"
	"	mov.u32 	%r1, %ctaid.x;\n"
	"	mov.u32 	%r2, %ntid.x;\n"
	"	mov.u32 	%r3, %tid.x;\n"
	"	mad.lo.s32 	%r4, %r1, %r2, %r3;\n"
	"	cvt.u64.u32 	%rd4, %r4;\n"
	"	mov.u32 	%r5, %nctaid.x;\n"
	"	mul.wide.u32 	%rd5, %r5, %r2;\n"
	"BB0_1:\n"
	"	setp.ge.u64 	%p1, %rd4, %rd2;\n"
	"	@%p1 bra 	BB0_2;\n"
	"	shl.b64 	%rd6, %rd4, 2;\n"
	"	add.s64 	%rd7, %rd3, %rd6;\n"
	"	ld.global.u32 	%r6, [%rd7];\n"
	"	add.s32 	%r7, %r6, 1;\n"
	"	st.global.u32 	[%rd7], %r7;\n"
	"	add.s64 	%rd4, %rd4, %rd5;\n"
	"	bra.uni 	BB0_1;\n"
	"BB0_2:\n"
	"	ret;\n"
	"}\n";

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
	p_cuModuleLoadData = dlsym(lib, "cuModuleLoadData");
	p_cuModuleGetFunction = dlsym(lib, "cuModuleGetFunction");
	p_cuLaunchKernel = dlsym(lib, "cuLaunchKernel");
	p_cuCtxSynchronize = dlsym(lib, "cuCtxSynchronize");
	p_cuMemsetD32 = dlsym(lib, "cuMemsetD32_v2");
	p_cuMemcpyHtoD = dlsym(lib, "cuMemcpyHtoD_v2");
	p_cuMemcpyDtoH = dlsym(lib, "cuMemcpyDtoH_v2");
	if (!p_cuInit || !p_cuDeviceGet || !p_cuDevicePrimaryCtxRetain || !p_cuCtxSetCurrent ||
	    !p_cuMemAlloc || !p_cuMemFree || !p_cuMemGetInfo || !p_cuGetErrorName ||
	    !p_cuModuleLoadData || !p_cuModuleGetFunction || !p_cuLaunchKernel ||
	    !p_cuCtxSynchronize || !p_cuMemsetD32 || !p_cuMemcpyHtoD || !p_cuMemcpyDtoH)
		return "libcuda.so.1 lacks a driver API entry point";
	return NULL;
}

// cu_load_kernel JIT-compiles touch_ptx in the current context.
static CUresult cu_load_kernel(void) {
	void *mod;
	CUresult r = p_cuModuleLoadData(&mod, touch_ptx);
	if (r) return r;
	return p_cuModuleGetFunction(&touch_fn, mod, "touch");
}

// cu_work runs one pass over words 32-bit words at ptr, by the kernel when it loaded, else by
// memset, and waits for it.
static CUresult cu_work(CUdeviceptr ptr, unsigned long long words, unsigned int value) {
	CUresult r;
	if (touch_fn) {
		void *args[] = {&ptr, &words};
		r = p_cuLaunchKernel(touch_fn, 1024, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
	} else {
		r = p_cuMemsetD32(ptr, value, (size_t)words);
	}
	if (r) return r;
	return p_cuCtxSynchronize();
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

// cu_htod, cu_dtoh and cu_error_name are not static: pattern.go calls them too.
CUresult cu_htod(CUdeviceptr dst, const void *src, size_t n) { return p_cuMemcpyHtoD(dst, src, n); }

CUresult cu_dtoh(void *dst, CUdeviceptr src, size_t n) { return p_cuMemcpyDtoH(dst, src, n); }

const char *cu_error_name(CUresult r) {
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
	"os/signal"
	"runtime"
	"slices"
	"syscall"
	"time"
)

const cudaErrorOutOfMemory = 2

// A CUDA context is current per OS thread, and the Go scheduler moves a goroutine between
// threads at any blocking point (the idle wait, a print): every driver call must come from the
// thread that made the context current, or the driver answers CUDA_ERROR_INVALID_CONTEXT (seen
// on an H200 once the owner woke from its idle wait).
func init() { runtime.LockOSThread() }

func main() {
	mib := flag.Int("mib", 0, "MiB of device memory to allocate in one cuMemAlloc")
	leave := flag.Int("leave", 0, "instead of -mib, allocate all the free memory but this many MiB (a loan)")
	device := flag.Int("device", 0, "CUDA device ordinal")
	probe := flag.Bool("probe", false, "only load libcuda.so.1 and initialise the driver")
	work := flag.Duration("work", 0, "after allocating, work on the memory for this long, printing the throughput")
	idle := flag.Bool("idle", false, "with -work: hold the memory, idle, until SIGUSR1 starts the work")
	idleFor := flag.Duration("idle-for", 2*time.Minute, "with -idle: give up (exit 6) when no SIGUSR1 came by then, so that a check that died leaves no GPU memory held")
	window := flag.Duration("window", 50*time.Millisecond, "throughput window")
	chunkMiB := flag.Int("chunk", 4096, "MiB one pass of the work covers (passes rotate through the allocation)")
	pattern := flag.Int("pattern", 0, "with -idle: fill the memory with a known pattern, idle, and at each of this many SIGUSR1s read it all back and check it byte for byte (the swap check's owner)")
	flag.Parse()
	if (*mib <= 0 && *leave <= 0 && !*probe) || (*mib > 0 && *leave > 0) || (*idle && *work <= 0) || *window <= 0 || *chunkMiB <= 0 {
		fmt.Fprintln(os.Stderr, "usage: cudaalloc -mib N|-leave N [-device I] [-work D [-idle] [-window D] [-chunk MiB]] | -probe")
		os.Exit(2)
	}
	// Before anything is printed: the check sends SIGUSR1 once it reads the idle line, and
	// SIGUSR1's default action would kill us.
	start := make(chan os.Signal, 1)
	signal.Notify(start, syscall.SIGUSR1)
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
	want := *mib
	if *leave > 0 {
		want = int(uint64(free)>>20) - *leave
		if want <= 0 {
			fmt.Printf("cudaalloc: only %d MiB free, cannot leave %d MiB\n", uint64(free)>>20, *leave)
			os.Exit(3)
		}
	}
	var ptr C.CUdeviceptr
	r := C.cu_alloc(C.size_t(want)<<20, &ptr)
	// Taking (nearly) everything can fail by a little: the free figure moves as the driver
	// reserves its own. Back off by a GiB a few times.
	for tries := 0; r == cudaErrorOutOfMemory && *leave > 0 && tries < 4 && want > 1024; tries++ {
		want -= 1024
		r = C.cu_alloc(C.size_t(want)<<20, &ptr)
	}
	check(fmt.Sprintf("allocating %d MiB", want), r)
	if *work <= 0 {
		fmt.Printf("cudaalloc: allocated %d MiB\n", want)
		C.cu_free(ptr)
		return
	}
	fmt.Printf("cudaalloc: holding %d MiB\n", want)
	if r := C.cu_load_kernel(); r != 0 {
		fmt.Printf("cudaalloc: the PTX kernel did not load (%s); working with cuMemsetD32\n", C.GoString(C.cu_error_name(r)))
	}
	if *idle && *pattern > 0 {
		os.Exit(owner(ptr, uint64(want)<<20, *pattern, start, *idleFor))
	}
	if *idle {
		fmt.Println("cudaalloc: idle; SIGUSR1 starts the work")
		select {
		case <-start:
		case <-time.After(*idleFor):
			fmt.Printf("cudaalloc: no SIGUSR1 within %s; giving up\n", *idleFor)
			os.Exit(6)
		}
	}
	signal.Stop(start)
	os.Exit(run(ptr, uint64(want)<<20, uint64(*chunkMiB)<<20, *work, *window))
}

// run works for d in passes of at most chunk bytes, rotating through the size bytes at ptr,
// and prints the passes per second of every window, then their median.
func run(ptr C.CUdeviceptr, size, chunk uint64, d, window time.Duration) int {
	chunk = min(chunk, size) &^ 3
	began := time.Now()
	fmt.Printf("cudaalloc: work started %d\n", began.UnixMicro())
	var rates []float64
	windowStart, n, offset := began, 0, uint64(0)
	for value := C.uint(1); ; value++ {
		if offset+chunk > size {
			offset = 0
		}
		if r := C.cu_work(ptr+C.CUdeviceptr(offset), C.ulonglong(chunk/4), value); r != 0 {
			fmt.Printf("cudaalloc: working: %s\n", C.GoString(C.cu_error_name(r)))
			return 4
		}
		offset += chunk
		n++
		now := time.Now()
		if elapsed := now.Sub(windowStart); elapsed >= window {
			rate := float64(n) / elapsed.Seconds()
			rates = append(rates, rate)
			fmt.Printf("cudaalloc: rate %d %d %d %.1f\n", windowStart.UnixMicro(), now.UnixMicro(), n, rate)
			windowStart, n = now, 0
		}
		if now.Sub(began) >= d {
			break
		}
	}
	slices.Sort(rates)
	median := 0.0
	if len(rates) > 0 {
		median = rates[len(rates)/2]
	}
	fmt.Printf("cudaalloc: work done: %d windows, median %.1f passes/s\n", len(rates), median)
	return 0
}
