// The shim's test client: reaches the CUDA driver and NVML the three ways real programs do and
// runs the steps on its command line, printing one line per step for shim_test.go.
//
//   sharetest direct|dlsym|procaddr STEP...
//
// direct calls the symbols it was linked against (-lcuda -lnvidia-ml), dlsym looks them up on
// the handles dlopen gives (as nvidia-smi and many runtimes do), procaddr fetches the CUDA ones
// through cuGetProcAddress and cuGetProcAddress_v2 (as the CUDA runtime does). Steps:
//   init                  cuInit(0)                         -> "init <result>"
//   info                  cuMemGetInfo                      -> "info free=<MiB> total=<MiB>"
//   devtotal              cuDeviceTotalMem                  -> "devtotal <MiB>"
//   <kind>:<MiB>          allocate (alloc, pitch, managed, async, async_ptsz, pool, create,
//                         array, array3d)                   -> "<kind> <MiB> <result>"
//   free                  free the latest allocation         -> "free <result>"
//   nvml / nvml2          nvmlDeviceGetMemoryInfo(_v2)      -> "nvml total= used= free= [reserved=]" (MiB)
//   env                   the mock driver's cuInit env      -> "env pipe=... visible=..."
//   calls                 allocations that reached the mock  -> "calls <n>"
//   hold                  print "holding" and wait for stdin to close
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
typedef struct { size_t Width, Height; int Format; unsigned int NumChannels; } DESC;
typedef struct { size_t Width, Height, Depth; int Format; unsigned int NumChannels, Flags; } DESC3;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

// Declared always: the dlsym and procaddr modes use them only for their types.
CUresult cuInit(unsigned int);
CUresult cuMemGetInfo_v2(size_t *, size_t *);
CUresult cuDeviceTotalMem_v2(size_t *, int);
CUresult cuMemAlloc_v2(CUdeviceptr *, size_t);
CUresult cuMemAllocPitch_v2(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
CUresult cuMemAllocManaged(CUdeviceptr *, size_t, unsigned int);
CUresult cuMemAllocAsync(CUdeviceptr *, size_t, void *);
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *, size_t, void *);
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *, size_t, void *, void *);
CUresult cuMemFree_v2(CUdeviceptr);
CUresult cuMemFreeAsync(CUdeviceptr, void *);
CUresult cuMemCreate(unsigned long long *, size_t, const void *, unsigned long long);
CUresult cuMemRelease(unsigned long long);
CUresult cuArrayCreate_v2(void **, const DESC *);
CUresult cuArray3DCreate_v2(void **, const DESC3 *);
CUresult cuArrayDestroy(void *);
int nvmlInit_v2(void);
int nvmlDeviceGetHandleByIndex_v2(unsigned int, void **);
int nvmlDeviceGetMemoryInfo(void *, nvmlMemory_t *);
int nvmlDeviceGetMemoryInfo_v2(void *, nvmlMemory_v2_t *);

static const char *mode;
static void *cuda, *nvml;

// sym finds a driver function the way the mode says.
__attribute__((unused)) static void *sym(const char *exported, const char *base, int version, int ptsz) {
  if (strcmp(mode, "procaddr") == 0 && base != NULL) {
    // Half through cuGetProcAddress (CUDA 11), half through _v2 (CUDA 12), each fetched
    // itself through cuGetProcAddress, as the runtime does.
    static int n;
    void *pfn = NULL;
    CUresult (*gpa)(const char *, void **, int, unsigned long long) = dlsym(cuda, "cuGetProcAddress");
    if (n++ % 2 == 0) {
      if (gpa("cuGetProcAddress", (void **)&gpa, 11080, 0) != 0 || gpa(base, &pfn, version, ptsz ? 2 : 0) != 0) return NULL;
    } else {
      CUresult (*gpa2)(const char *, void **, int, unsigned long long, int *) = NULL;
      if (gpa("cuGetProcAddress", (void **)&gpa2, 12000, 0) != 0 || gpa2(base, &pfn, version, ptsz ? 2 : 0, NULL) != 0) return NULL;
    }
    return pfn;
  }
  return dlsym(strncmp(exported, "nvml", 4) == 0 ? nvml : cuda, exported);
}

#ifdef DIRECT
#define FN(var, exported, base, version, ptsz) __typeof__(&exported) var = exported
#else
#define FN(var, exported, base, version, ptsz) __typeof__(&exported) var = (__typeof__(&exported))sym(#exported, base, version, ptsz)
#endif

static CUdeviceptr ptrs[256];
static char kinds[256][16];
static int nptr;

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  cuda = dlopen("libcuda.so.1", RTLD_NOW);
  nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (cuda == NULL || nvml == NULL) {
    fprintf(stderr, "sharetest: %s\n", dlerror());
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  for (int i = 2; i < argc; i++) {
    char *a = argv[i], kind[16] = "";
    unsigned long long mib = 0;
    if (sscanf(a, "%15[a-z_0-9]:%llu", kind, &mib) == 2) {
      size_t n = (size_t)(mib << 20);
      CUresult r = -1;
      CUdeviceptr p = 0;
      if (!strcmp(kind, "alloc")) {
        FN(f, cuMemAlloc_v2, "cuMemAlloc", 12000, 0);
        r = f(&p, n);
      } else if (!strcmp(kind, "pitch")) {
        size_t pitch;
        FN(f, cuMemAllocPitch_v2, "cuMemAllocPitch", 12000, 0);
        r = f(&p, &pitch, 1 << 20, mib, 4);
      } else if (!strcmp(kind, "managed")) {
        FN(f, cuMemAllocManaged, "cuMemAllocManaged", 12000, 0);
        r = f(&p, n, 1);
      } else if (!strcmp(kind, "async")) {
        FN(f, cuMemAllocAsync, "cuMemAllocAsync", 12000, 0);
        r = f(&p, n, NULL);
      } else if (!strcmp(kind, "async_ptsz")) {
        FN(f, cuMemAllocAsync_ptsz, "cuMemAllocAsync", 12000, 1);
        r = f(&p, n, NULL);
      } else if (!strcmp(kind, "pool")) {
        FN(f, cuMemAllocFromPoolAsync, "cuMemAllocFromPoolAsync", 12000, 0);
        r = f(&p, n, NULL, NULL);
      } else if (!strcmp(kind, "create")) {
        FN(f, cuMemCreate, "cuMemCreate", 12000, 0);
        r = f(&p, n, NULL, 0);
      } else if (!strcmp(kind, "array")) {
        DESC d = {.Width = 1 << 18, .Height = mib, .Format = 0x20, .NumChannels = 1}; // 1 MiB rows of floats
        void *arr = NULL;
        FN(f, cuArrayCreate_v2, "cuArrayCreate", 12000, 0);
        r = f(&arr, &d);
        p = (CUdeviceptr)arr;
      } else if (!strcmp(kind, "array3d")) {
        DESC3 d = {.Width = 1 << 16, .Height = 4, .Depth = mib, .Format = 0x20, .NumChannels = 1};
        void *arr = NULL;
        FN(f, cuArray3DCreate_v2, "cuArray3DCreate", 12000, 0);
        r = f(&arr, &d);
        p = (CUdeviceptr)arr;
      }
      if (r == 0) {
        ptrs[nptr] = p;
        snprintf(kinds[nptr++], sizeof kinds[0], "%s", kind);
      }
      printf("%s %llu %d\n", kind, mib, r);
    } else if (!strcmp(a, "free")) {
      CUresult r = -1;
      if (nptr == 0) return 2;
      CUdeviceptr p = ptrs[--nptr];
      const char *k = kinds[nptr];
      if (!strcmp(k, "create")) {
        FN(f, cuMemRelease, "cuMemRelease", 12000, 0);
        r = f(p);
      } else if (!strncmp(k, "array", 5)) {
        FN(f, cuArrayDestroy, "cuArrayDestroy", 12000, 0);
        r = f((void *)p);
      } else if (!strncmp(k, "async", 5) || !strcmp(k, "pool")) {
        FN(f, cuMemFreeAsync, "cuMemFreeAsync", 12000, 0);
        r = f(p, NULL);
      } else {
        FN(f, cuMemFree_v2, "cuMemFree", 12000, 0);
        r = f(p);
      }
      printf("free %d\n", r);
    } else if (!strcmp(a, "init")) {
      FN(f, cuInit, "cuInit", 12000, 0);
      printf("init %d\n", f(0));
    } else if (!strcmp(a, "info")) {
      size_t fr = 0, t = 0;
      FN(f, cuMemGetInfo_v2, "cuMemGetInfo", 12000, 0);
      CUresult r = f(&fr, &t);
      printf("info free=%zu total=%zu r=%d\n", fr >> 20, t >> 20, r);
    } else if (!strcmp(a, "devtotal")) {
      size_t t = 0;
      FN(f, cuDeviceTotalMem_v2, "cuDeviceTotalMem", 12000, 0);
      f(&t, 0);
      printf("devtotal %zu\n", t >> 20);
    } else if (!strcmp(a, "nvml") || !strcmp(a, "nvml2")) {
      void *dev;
      int (*init)(void) = dlsym(nvml, "nvmlInit_v2");
      int (*byidx)(unsigned int, void **) = dlsym(nvml, "nvmlDeviceGetHandleByIndex_v2");
      init();
      byidx(0, &dev);
      if (!strcmp(a, "nvml")) {
        nvmlMemory_t m;
#ifdef DIRECT
        int (*f)(void *, nvmlMemory_t *) = nvmlDeviceGetMemoryInfo;
#else
        int (*f)(void *, nvmlMemory_t *) = dlsym(nvml, "nvmlDeviceGetMemoryInfo");
#endif
        int r = f(dev, &m);
        printf("nvml total=%llu used=%llu free=%llu r=%d\n", m.total >> 20, m.used >> 20, m.free >> 20, r);
      } else {
        nvmlMemory_v2_t m = {.version = (unsigned int)(sizeof m | (2u << 24))};
#ifdef DIRECT
        int (*f)(void *, nvmlMemory_v2_t *) = nvmlDeviceGetMemoryInfo_v2;
#else
        int (*f)(void *, nvmlMemory_v2_t *) = dlsym(nvml, "nvmlDeviceGetMemoryInfo_v2");
#endif
        int r = f(dev, &m);
        printf("nvml2 total=%llu used=%llu free=%llu reserved=%llu r=%d\n", m.total >> 20, m.used >> 20, m.free >> 20, m.reserved >> 20, r);
      }
    } else if (!strcmp(a, "env")) {
      const char *(*f)(void) = dlsym(cuda, "mock_init_env");
      printf("env %s\n", f());
    } else if (!strcmp(a, "calls")) {
      int (*f)(void) = dlsym(cuda, "mock_calls");
      printf("calls %d\n", f());
    } else if (!strcmp(a, "hold")) {
      printf("holding\n");
      char buf[64];
      while (read(0, buf, sizeof buf) > 0) {
      }
    } else {
      fprintf(stderr, "sharetest: unknown step %s\n", a);
      return 2;
    }
  }
  return 0;
}
