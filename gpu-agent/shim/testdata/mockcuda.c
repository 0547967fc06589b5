// A stand-in for libcuda.so.1: one GPU of MOCK_GPU_BYTES whose allocations are counted, so the
// shim's tests need no NVIDIA software. It records the environment cuInit ran with
// (mock_init_env) and how many allocations reached it (mock_calls).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
#define MOCK_GPU_BYTES (80ULL << 30)

static unsigned long long used, next_ptr = 0x700000000000ULL;
static int inited, calls;
static char init_env[1024];

// Sizes by pointer, for frees (a few hundred allocations at most in the tests).
static struct { unsigned long long p, n; } live[4096];

static CUresult take(unsigned long long *p, unsigned long long n) {
  calls++;
  if (!inited) return 3; // CUDA_ERROR_NOT_INITIALIZED
  if (n == 0 || used + n > MOCK_GPU_BYTES) return 2;
  for (int i = 0; i < 4096; i++) {
    if (live[i].p == 0) {
      live[i].p = next_ptr;
      live[i].n = n;
      *p = next_ptr;
      next_ptr += (n + 0xfffff) & ~0xfffffULL;
      used += n;
      return 0;
    }
  }
  return 2;
}

static CUresult give(unsigned long long p) {
  for (int i = 0; i < 4096; i++) {
    if (live[i].p == p && p != 0) {
      used -= live[i].n;
      live[i].p = 0;
      return 0;
    }
  }
  return 1; // CUDA_ERROR_INVALID_VALUE
}

CUresult cuInit(unsigned int f) {
  (void)f;
  const char *p = getenv("CUDA_MPS_PIPE_DIRECTORY"), *v = getenv("CUDA_VISIBLE_DEVICES");
  snprintf(init_env, sizeof init_env, "pipe=%s visible=%s", p ? p : "", v ? v : "");
  inited = 1;
  return 0;
}
const char *mock_init_env(void) { return init_env; }
int mock_calls(void) { return calls; }
unsigned long long mock_used(void) { return used; }

CUresult cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? 0 : 101; }
CUresult cuDeviceTotalMem_v2(size_t *b, int d) { (void)d; *b = MOCK_GPU_BYTES; return 0; }
CUresult cuMemGetInfo_v2(size_t *f, size_t *t) {
  if (!inited) return 3;
  *f = MOCK_GPU_BYTES - used;
  *t = MOCK_GPU_BYTES;
  return 0;
}
CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) { return take(p, n); }
CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned int e) {
  (void)e;
  *pitch = w;
  return take(p, (unsigned long long)w * h);
}
CUresult cuMemAllocManaged(CUdeviceptr *p, size_t n, unsigned int f) { (void)f; return take(p, n); }
CUresult cuMemFree_v2(CUdeviceptr p) { return give(p); }
CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) { (void)s; return take(p, n); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t n, void *s) { (void)s; return take(p, n); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t n, void *pool, void *s) { (void)pool; (void)s; return take(p, n); }
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t n, void *pool, void *s) { (void)pool; (void)s; return take(p, n); }
CUresult cuMemFreeAsync(CUdeviceptr p, void *s) { (void)s; return give(p); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, void *s) { (void)s; return give(p); }
CUresult cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long f) { (void)prop; (void)f; return take(h, n); }
CUresult cuMemRelease(unsigned long long h) { return give(h); }

typedef struct { size_t Width, Height; int Format; unsigned int NumChannels; } DESC;
typedef struct { size_t Width, Height, Depth; int Format; unsigned int NumChannels, Flags; } DESC3;
CUresult cuArrayCreate_v2(void **a, const DESC *d) {
  unsigned long long p;
  CUresult r = take(&p, (unsigned long long)d->Width * (d->Height ? d->Height : 1) * 4 * d->NumChannels);
  if (r == 0) *a = (void *)p;
  return r;
}
CUresult cuArray3DCreate_v2(void **a, const DESC3 *d) {
  unsigned long long p;
  CUresult r = take(&p, (unsigned long long)d->Width * (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1) * 4 * d->NumChannels);
  if (r == 0) *a = (void *)p;
  return r;
}
CUresult cuArrayDestroy(void *a) { return give((unsigned long long)a); }

// cuGetProcAddress as the real driver answers it: the base name and a version select the ABI
// (the _v2 symbol from 3020 on), the per-thread flag the _ptsz variant. Like the driver, it looks
// in its own table, not through dlsym.
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags, int *status);
CUresult cuGetProcAddress(const char *sym, void **pfn, int version, unsigned long long flags);
static const struct { const char *name; void *fn; } table[] = {
    {"cuInit", (void *)cuInit}, {"cuDeviceGet", (void *)cuDeviceGet},
    {"cuDeviceTotalMem_v2", (void *)cuDeviceTotalMem_v2}, {"cuMemGetInfo_v2", (void *)cuMemGetInfo_v2},
    {"cuMemAlloc_v2", (void *)cuMemAlloc_v2}, {"cuMemAllocPitch_v2", (void *)cuMemAllocPitch_v2},
    {"cuMemAllocManaged", (void *)cuMemAllocManaged}, {"cuMemFree_v2", (void *)cuMemFree_v2},
    {"cuMemAllocAsync", (void *)cuMemAllocAsync}, {"cuMemAllocAsync_ptsz", (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocFromPoolAsync", (void *)cuMemAllocFromPoolAsync},
    {"cuMemAllocFromPoolAsync_ptsz", (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemFreeAsync", (void *)cuMemFreeAsync}, {"cuMemFreeAsync_ptsz", (void *)cuMemFreeAsync_ptsz},
    {"cuMemCreate", (void *)cuMemCreate}, {"cuMemRelease", (void *)cuMemRelease},
    {"cuArrayCreate_v2", (void *)cuArrayCreate_v2}, {"cuArray3DCreate_v2", (void *)cuArray3DCreate_v2},
    {"cuArrayDestroy", (void *)cuArrayDestroy}, {"cuGetProcAddress", (void *)cuGetProcAddress},
    {"cuGetProcAddress_v2", (void *)cuGetProcAddress_v2}, {NULL, NULL}};
static void *lookup(const char *name) {
  for (int i = 0; table[i].name != NULL; i++)
    if (strcmp(table[i].name, name) == 0) return table[i].fn;
  return NULL;
}
CUresult cuGetProcAddress(const char *sym, void **pfn, int version, unsigned long long flags) {
  char name[256];
  static const char *v2[] = {"cuMemGetInfo", "cuDeviceTotalMem", "cuMemAlloc", "cuMemAllocPitch", "cuMemFree",
                             "cuArrayCreate", "cuArray3DCreate", NULL};
  snprintf(name, sizeof name, "%s", sym);
  for (int i = 0; v2[i] != NULL; i++)
    if (strcmp(sym, v2[i]) == 0 && version >= 3020) snprintf(name, sizeof name, "%s_v2", sym);
  if (strcmp(sym, "cuGetProcAddress") == 0 && version >= 12000) snprintf(name, sizeof name, "cuGetProcAddress_v2");
  if (flags & 2) {
    char ptsz[300];
    snprintf(ptsz, sizeof ptsz, "%s_ptsz", name);
    if ((*pfn = lookup(ptsz)) != NULL) return 0;
  }
  *pfn = lookup(name);
  return *pfn ? 0 : 500;
}
CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, unsigned long long flags, int *status) {
  CUresult r = cuGetProcAddress(sym, pfn, version, flags);
  if (status) *status = r == 0 ? 0 : 1;
  return r;
}
