// libfairway-share.so: makes a GPU share look like a GPU of the share's size to the processes
// of the container that holds it, and keeps their allocations within it.
//
// Loaded into every process of a share's container through /etc/ld.so.preload (mounted
// read-only by the gpu-agent's device plugin; see ../doc.go and docs/isolation.md), it interposes
// on the CUDA driver API and NVML:
//
//   - cuMemGetInfo_v2, cuDeviceTotalMem_v2, nvmlDeviceGetMemoryInfo and _v2 report the share
//     as the total and the container's own allocations as used;
//   - the cuMemAlloc family, cuMemCreate and cuArray*Create are refused with
//     CUDA_ERROR_OUT_OF_MEMORY when they would take the container past its share;
//   - cuInit runs with CUDA_MPS_PIPE_DIRECTORY and CUDA_VISIBLE_DEVICES as the share says, and
//     fails (CUDA_ERROR_NO_DEVICE) when the share's MPS control pipe is missing, instead of
//     letting the driver fall back to a context without MPS and so without its limit.
//
// Calls reach it three ways, all handled: a direct call to the exported symbol (a program
// linked against libcuda.so.1), dlsym() on the driver's handle (nvidia-smi and many runtimes
// load the libraries with dlopen), and cuGetProcAddress (the CUDA runtime, static or shared,
// fetches every driver entry point through it since CUDA 11.3).
//
// The container's use is shared by its processes through a small file (state=, default in
// /dev/shm) of per-process slots, each held by an fcntl lock while its process lives, so a dead
// process's slot is reclaimed without any cooperation from it.
//
// This is a convenience and a second line, not the boundary: a static binary, a process started
// by a loader that ignores /etc/ld.so.preload, or one that talks to /dev/nvidia* itself does not
// load it. What holds against those is the share's MPS server (its server-side limit) and the
// driver; docs/isolation.md says which mode guarantees what.
//
// It needs only libc and libdl to build (no CUDA or NVML headers: the few types it uses are
// declared here as the public headers define them).
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

// The config file the device plugin mounts read-only into the share's container. Keep in step
// with ContainerDir and ConfigName in ../install.go (shim_test.go checks).
#define FAIRWAY_SHARE_CONFIG_PATH "/usr/local/fairway-share/share.conf"
#define FAIRWAY_SHARE_DEFAULT_STATE "/dev/shm/.fairway-share.state"

#define EXPORT __attribute__((visibility("default")))

// CUDA driver API types and codes (cuda.h).
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned long long CUmemGenericAllocationHandle;
typedef unsigned long long cuuint64_t;
typedef void *CUstream;
typedef void *CUarray;
typedef void *CUmemoryPool;
typedef int CUdriverProcAddressQueryResult;
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_NO_DEVICE 100
#define CUDA_ERROR_NOT_FOUND 500
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2

typedef struct {
  size_t Width, Height;
  int Format;
  unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;
typedef struct {
  size_t Width, Height, Depth;
  int Format;
  unsigned int NumChannels, Flags;
} CUDA_ARRAY3D_DESCRIPTOR;
// CUmemAllocationProp is only passed through; its size matters to nobody here.
typedef struct CUmemAllocationProp_st CUmemAllocationProp;

// NVML types and codes (nvml.h).
typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
#define NVML_SUCCESS 0
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
  unsigned int version;
  unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

// ---- configuration -------------------------------------------------------------------------

static struct {
  int active;              // a share is configured: limit and report
  unsigned long long limit; // bytes
  char pipe_dir[512];      // forced CUDA_MPS_PIPE_DIRECTORY; empty: left alone
  char visible[256];       // forced CUDA_VISIBLE_DEVICES; empty: left alone
  char state[512];         // the container's shared accounting file
} cfg;

static pthread_once_t cfg_once = PTHREAD_ONCE_INIT;

static void trim(char *s) {
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t')) s[--n] = 0;
}

static void load_config(void) {
  // The mounted file wins. The environment names a file only where none is mounted (tests, or
  // a process outside a share's container), so a tenant cannot point the library elsewhere.
  const char *path = FAIRWAY_SHARE_CONFIG_PATH;
  if (access(path, R_OK) != 0) {
    path = getenv("FAIRWAY_SHARE_CONFIG");
    if (path == NULL || *path == 0) return;
  }
  FILE *f = fopen(path, "re");
  if (f == NULL) return;
  snprintf(cfg.state, sizeof cfg.state, "%s", FAIRWAY_SHARE_DEFAULT_STATE);
  char line[1024];
  while (fgets(line, sizeof line, f) != NULL) {
    trim(line);
    char *eq = strchr(line, '=');
    if (line[0] == '#' || eq == NULL) continue;
    *eq = 0;
    const char *k = line, *v = eq + 1;
    if (strcmp(k, "memory_limit_bytes") == 0) {
      char *end;
      errno = 0;
      unsigned long long n = strtoull(v, &end, 10);
      if (errno == 0 && *end == 0 && n > 0) {
        cfg.limit = n;
        cfg.active = 1;
      }
    } else if (strcmp(k, "mps_pipe_directory") == 0) {
      snprintf(cfg.pipe_dir, sizeof cfg.pipe_dir, "%s", v);
    } else if (strcmp(k, "visible_devices") == 0) {
      snprintf(cfg.visible, sizeof cfg.visible, "%s", v);
    } else if (strcmp(k, "state") == 0 && v[0] != 0) {
      snprintf(cfg.state, sizeof cfg.state, "%s", v);
    }
  }
  fclose(f);
}

static int active(void) {
  pthread_once(&cfg_once, load_config);
  return cfg.active;
}

// The share's environment, put back before the driver reads it: at load (before main) and again
// at cuInit, so a process that changed it in between gets the share's values anyway.
static void force_env(void) {
  if (cfg.pipe_dir[0] != 0) setenv("CUDA_MPS_PIPE_DIRECTORY", cfg.pipe_dir, 1);
  if (cfg.visible[0] != 0) setenv("CUDA_VISIBLE_DEVICES", cfg.visible, 1);
}

// ---- finding the real functions --------------------------------------------------------------

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym_p;

static void *real_dlsym(void *h, const char *name) {
  if (real_dlsym_p == NULL) {
    // dlvsym is not interposed, so it reaches libc's dlsym (GLIBC_2.34 since dlsym moved
    // into libc, GLIBC_2.2.5 on x86-64 before; GLIBC_2.17 on arm64).
    static const char *versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", NULL};
    for (int i = 0; versions[i] != NULL && real_dlsym_p == NULL; i++)
      real_dlsym_p = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    if (real_dlsym_p == NULL) return NULL;
  }
  return real_dlsym_p(h, name);
}

static void *lib_handle(const char *soname) {
  void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  if (h == NULL) h = dlopen(soname, RTLD_NOW);
  return h;
}

static void *cuda_sym(const char *name) {
  static void *h;
  if (h == NULL) h = lib_handle("libcuda.so.1");
  return h == NULL ? NULL : real_dlsym(h, name);
}

static void *nvml_sym(const char *name) {
  static void *h;
  if (h == NULL) h = lib_handle("libnvidia-ml.so.1");
  return h == NULL ? NULL : real_dlsym(h, name);
}

// REAL(lib, ret, name, args) declares real_<name>, resolved once from the library.
#define REAL(lib, ret, name, params)                                  \
  typedef ret(*name##_fn) params;                                     \
  static name##_fn real_##name(void) {                                \
    static name##_fn p;                                               \
    if (p == NULL) p = (name##_fn)lib##_sym(#name);                   \
    return p;                                                         \
  }

// ---- the container's use ---------------------------------------------------------------------

// Shared file: a header (whose first byte range is the container-wide lock) and one slot per
// process. A slot's bytes are its process's allocations; the process holds a write lock on the
// slot while it lives.
#define SLOTS 512
struct slot {
  int64_t pid;
  uint64_t bytes;
};
struct shared {
  char magic[8];
  uint64_t pad[7];
  struct slot slots[SLOTS];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; // threads of this process
static int state_fd = -1;
static struct shared *st;
static int my_slot = -1;
static uint64_t local_bytes; // when no shared file can be had: this process's own use
static int state_tried;

static off_t slot_off(int i) { return (off_t)offsetof(struct shared, slots) + (off_t)i * (off_t)sizeof(struct slot); }

static int lock_range(int cmd, short type, off_t off, off_t len) {
  struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = off, .l_len = len};
  return fcntl(state_fd, cmd, &fl);
}

static void open_state(void) {
  if (state_tried) return;
  state_tried = 1;
  int fd = open(cfg.state, O_RDWR | O_CREAT | O_CLOEXEC | O_EXCL, 0666);
  if (fd >= 0) {
    fchmod(fd, 0666); // every user of the container shares it, whatever the umask
  } else if (errno == EEXIST) {
    fd = open(cfg.state, O_RDWR | O_CLOEXEC);
  }
  if (fd < 0) return;
  struct stat sb;
  if (fstat(fd, &sb) != 0 || (sb.st_size < (off_t)sizeof(struct shared) && ftruncate(fd, sizeof(struct shared)) != 0)) {
    close(fd);
    return;
  }
  void *m = mmap(NULL, sizeof(struct shared), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) {
    close(fd);
    return;
  }
  state_fd = fd;
  st = m;
}

// claim_slot takes a free slot (one whose lock nobody holds) for this process; callers hold
// mu and the container lock.
static void claim_slot(void) {
  if (my_slot >= 0 || st == NULL) return;
  for (int i = 0; i < SLOTS; i++) {
    if (lock_range(F_SETLK, F_WRLCK, slot_off(i), sizeof(struct slot)) == 0) {
      my_slot = i;
      st->slots[i].pid = getpid();
      st->slots[i].bytes = 0;
      return;
    }
  }
}

// container_lock serialises the check and the reservation across the container's processes.
static void container_lock(void) {
  pthread_mutex_lock(&mu);
  open_state();
  if (st != NULL) {
    while (lock_range(F_SETLKW, F_WRLCK, 0, 8) != 0 && errno == EINTR) {
    }
    claim_slot();
  }
}

static void container_unlock(void) {
  if (st != NULL) lock_range(F_SETLK, F_UNLCK, 0, 8);
  pthread_mutex_unlock(&mu);
}

// used_locked is the container's use; a slot whose process is gone (its lock is free) is
// emptied on the way. Callers hold container_lock.
static uint64_t used_locked(void) {
  if (st == NULL) return local_bytes;
  uint64_t sum = 0;
  for (int i = 0; i < SLOTS; i++) {
    if (i == my_slot) {
      sum += st->slots[i].bytes;
      continue;
    }
    if (st->slots[i].bytes == 0) continue;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = slot_off(i), .l_len = sizeof(struct slot)};
    if (fcntl(state_fd, F_GETLK, &fl) == 0 && fl.l_type == F_UNLCK) {
      st->slots[i].bytes = 0; // its process has exited
      continue;
    }
    sum += st->slots[i].bytes;
  }
  return sum;
}

static uint64_t *mine(void) { return (st != NULL && my_slot >= 0) ? &st->slots[my_slot].bytes : &local_bytes; }

static uint64_t container_used(void) {
  container_lock();
  uint64_t u = used_locked();
  container_unlock();
  return u;
}

// reserve counts n bytes against the share before the driver allocates them; 0 when they would
// not fit.
static int reserve(uint64_t n) {
  container_lock();
  uint64_t used = used_locked();
  int ok = used <= cfg.limit && n <= cfg.limit - used;
  if (ok) *mine() += n;
  container_unlock();
  return ok;
}

static void unreserve(uint64_t n) {
  container_lock();
  uint64_t *m = mine();
  *m = *m >= n ? *m - n : 0;
  container_unlock();
}

// ---- what this process allocated -------------------------------------------------------------

// An open-addressing table from a device pointer, array or allocation handle to its size, so
// that a free gives back what its allocation took.
struct entry {
  uint64_t key, size;
};
static struct entry *tab;
static size_t tab_cap, tab_len, tab_used; // used counts tombstones too
#define TOMB UINT64_MAX
static pthread_mutex_t tab_mu = PTHREAD_MUTEX_INITIALIZER;

static size_t hash(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return (size_t)k;
}

static void tab_put_nolock(uint64_t key, uint64_t size);

static int tab_grow(void) {
  size_t ncap = tab_cap == 0 ? 1024 : (tab_len * 4 > tab_cap ? tab_cap * 2 : tab_cap);
  struct entry *old = tab;
  size_t ocap = tab_cap;
  struct entry *n = calloc(ncap, sizeof *n);
  if (n == NULL) return 0;
  tab = n;
  tab_cap = ncap;
  tab_len = tab_used = 0;
  for (size_t i = 0; i < ocap; i++)
    if (old[i].key != 0 && old[i].key != TOMB) tab_put_nolock(old[i].key, old[i].size);
  free(old);
  return 1;
}

static void tab_put_nolock(uint64_t key, uint64_t size) {
  size_t i = hash(key) & (tab_cap - 1);
  while (tab[i].key != 0 && tab[i].key != TOMB && tab[i].key != key) i = (i + 1) & (tab_cap - 1);
  if (tab[i].key == 0) tab_used++;
  if (tab[i].key != key) tab_len++;
  tab[i].key = key;
  tab[i].size = size;
}

static void tab_put(uint64_t key, uint64_t size) {
  if (key == 0 || key == TOMB) return;
  pthread_mutex_lock(&tab_mu);
  if ((tab_used + 1) * 2 > tab_cap && !tab_grow()) {
    pthread_mutex_unlock(&tab_mu);
    return;
  }
  tab_put_nolock(key, size);
  pthread_mutex_unlock(&tab_mu);
}

// tab_take removes key and returns its size (0 when unknown: not ours to give back).
static uint64_t tab_take(uint64_t key) {
  uint64_t size = 0;
  pthread_mutex_lock(&tab_mu);
  if (tab_cap != 0 && key != 0 && key != TOMB) {
    size_t i = hash(key) & (tab_cap - 1);
    while (tab[i].key != 0) {
      if (tab[i].key == key) {
        size = tab[i].size;
        tab[i].key = TOMB;
        tab_len--;
        break;
      }
      i = (i + 1) & (tab_cap - 1);
    }
  }
  pthread_mutex_unlock(&tab_mu);
  return size;
}

static void freed(uint64_t key) {
  uint64_t n = tab_take(key);
  if (n != 0) unreserve(n);
}

// ---- CUDA ------------------------------------------------------------------------------------

REAL(cuda, CUresult, cuInit, (unsigned int))
REAL(cuda, CUresult, cuMemGetInfo_v2, (size_t *, size_t *))
REAL(cuda, CUresult, cuDeviceTotalMem_v2, (size_t *, CUdevice))
REAL(cuda, CUresult, cuMemAlloc_v2, (CUdeviceptr *, size_t))
REAL(cuda, CUresult, cuMemAllocPitch_v2, (CUdeviceptr *, size_t *, size_t, size_t, unsigned int))
REAL(cuda, CUresult, cuMemAllocManaged, (CUdeviceptr *, size_t, unsigned int))
REAL(cuda, CUresult, cuMemFree_v2, (CUdeviceptr))
REAL(cuda, CUresult, cuMemAllocAsync, (CUdeviceptr *, size_t, CUstream))
REAL(cuda, CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr *, size_t, CUstream))
REAL(cuda, CUresult, cuMemAllocFromPoolAsync, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))
REAL(cuda, CUresult, cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *, size_t, CUmemoryPool, CUstream))
REAL(cuda, CUresult, cuMemFreeAsync, (CUdeviceptr, CUstream))
REAL(cuda, CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr, CUstream))
REAL(cuda, CUresult, cuMemCreate, (CUmemGenericAllocationHandle *, size_t, const CUmemAllocationProp *, unsigned long long))
REAL(cuda, CUresult, cuMemRelease, (CUmemGenericAllocationHandle))
REAL(cuda, CUresult, cuArrayCreate_v2, (CUarray *, const CUDA_ARRAY_DESCRIPTOR *))
REAL(cuda, CUresult, cuArray3DCreate_v2, (CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *))
REAL(cuda, CUresult, cuArrayDestroy, (CUarray))
REAL(cuda, CUresult, cuGetProcAddress, (const char *, void **, int, cuuint64_t))
REAL(cuda, CUresult, cuGetProcAddress_v2, (const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))

#define CALL(name, ...) (real_##name() == NULL ? CUDA_ERROR_NOT_FOUND : real_##name()(__VA_ARGS__))

EXPORT CUresult cuInit(unsigned int flags) {
  if (active()) {
    force_env();
    if (cfg.pipe_dir[0] != 0) {
      // Without its control pipe the driver would open a context of its own, outside MPS and
      // so outside the share's server-side limit: refuse instead.
      char p[600];
      snprintf(p, sizeof p, "%s/control", cfg.pipe_dir);
      if (access(p, F_OK) != 0) return CUDA_ERROR_NO_DEVICE;
    }
  }
  return CALL(cuInit, flags);
}

// report turns the driver's view into the share's: total the share (or less, if the GPU has
// less), used the container's own, free what is left of the share and of the GPU.
static void report(unsigned long long real_total, unsigned long long real_free, unsigned long long *total,
                   unsigned long long *freep, unsigned long long *used) {
  unsigned long long t = real_total < cfg.limit ? real_total : cfg.limit;
  unsigned long long u = container_used();
  unsigned long long f = u < t ? t - u : 0;
  if (f > real_free) f = real_free;
  *total = t;
  *freep = f;
  if (used != NULL) *used = u;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *freep, size_t *totalp) {
  size_t f = 0, t = 0;
  CUresult r = CALL(cuMemGetInfo_v2, &f, &t);
  if (r != CUDA_SUCCESS || !active()) {
    if (freep) *freep = f;
    if (totalp) *totalp = t;
    return r;
  }
  unsigned long long tt, ff;
  report(t, f, &tt, &ff, NULL);
  if (freep) *freep = ff;
  if (totalp) *totalp = tt;
  return r;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  CUresult r = CALL(cuDeviceTotalMem_v2, bytes, dev);
  if (r == CUDA_SUCCESS && active() && bytes != NULL && *bytes > cfg.limit) *bytes = cfg.limit;
  return r;
}

// ALLOC runs an allocation of n bytes whose result key is KEY, within the share.
#define ALLOC(n, call, key)                                 \
  do {                                                      \
    if (!active()) return call;                             \
    uint64_t n_ = (n);                                      \
    if (!reserve(n_)) return CUDA_ERROR_OUT_OF_MEMORY;      \
    CUresult r_ = call;                                     \
    if (r_ == CUDA_SUCCESS)                                 \
      tab_put((uint64_t)(key), n_);                         \
    else                                                    \
      unreserve(n_);                                        \
    return r_;                                              \
  } while (0)

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { ALLOC(n, CALL(cuMemAlloc_v2, dptr, n), *dptr); }

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t w, size_t h, unsigned int elem) {
  // The pitch is the driver's to choose (at most a row's alignment more); w*h is what the
  // share is charged, the driver's pitch*h being known only afterwards.
  ALLOC((uint64_t)w * h, CALL(cuMemAllocPitch_v2, dptr, pitch, w, h, elem), *dptr);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned int flags) {
  ALLOC(n, CALL(cuMemAllocManaged, dptr, n, flags), *dptr);
}

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t n, CUstream s) { ALLOC(n, CALL(cuMemAllocAsync, dptr, n, s), *dptr); }

EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t n, CUstream s) {
  ALLOC(n, CALL(cuMemAllocAsync_ptsz, dptr, n, s), *dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, CUmemoryPool p, CUstream s) {
  ALLOC(n, CALL(cuMemAllocFromPoolAsync, dptr, n, p, s), *dptr);
}

EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t n, CUmemoryPool p, CUstream s) {
  ALLOC(n, CALL(cuMemAllocFromPoolAsync_ptsz, dptr, n, p, s), *dptr);
}

EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *prop, unsigned long long flags) {
  ALLOC(n, CALL(cuMemCreate, h, n, prop, flags), *h);
}

static uint64_t array_bytes(size_t w, size_t h, size_t d, int format, unsigned int channels) {
  // CUarray_format: 0x01/0x08 8-bit, 0x02/0x09/0x10 16-bit, 0x03/0x0a/0x20 32-bit; wider and
  // block-compressed formats are counted as 32-bit per channel.
  unsigned int elem;
  switch (format) {
  case 0x01: case 0x08: elem = 1; break;
  case 0x02: case 0x09: case 0x10: elem = 2; break;
  default: elem = 4; break;
  }
  if (h == 0) h = 1;
  if (d == 0) d = 1;
  if (channels == 0) channels = 1;
  return (uint64_t)w * h * d * elem * channels;
}

EXPORT CUresult cuArrayCreate_v2(CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d) {
  if (d == NULL) return CALL(cuArrayCreate_v2, a, d);
  ALLOC(array_bytes(d->Width, d->Height, 1, d->Format, d->NumChannels), CALL(cuArrayCreate_v2, a, d), (uintptr_t)*a);
}

EXPORT CUresult cuArray3DCreate_v2(CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d) {
  if (d == NULL) return CALL(cuArray3DCreate_v2, a, d);
  ALLOC(array_bytes(d->Width, d->Height, d->Depth, d->Format, d->NumChannels), CALL(cuArray3DCreate_v2, a, d), (uintptr_t)*a);
}

// FREE gives back what KEY's allocation took once the driver has freed it.
#define FREE(call, key)                       \
  do {                                        \
    CUresult r_ = call;                       \
    if (r_ == CUDA_SUCCESS && active()) freed((uint64_t)(key)); \
    return r_;                                \
  } while (0)

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { FREE(CALL(cuMemFree_v2, p), p); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { FREE(CALL(cuMemFreeAsync, p, s), p); }
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { FREE(CALL(cuMemFreeAsync_ptsz, p, s), p); }
EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) { FREE(CALL(cuMemRelease, h), h); }
EXPORT CUresult cuArrayDestroy(CUarray a) { FREE(CALL(cuArrayDestroy, a), (uintptr_t)a); }

// ---- NVML ------------------------------------------------------------------------------------

REAL(nvml, nvmlReturn_t, nvmlDeviceGetMemoryInfo, (nvmlDevice_t, nvmlMemory_t *))
REAL(nvml, nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, (nvmlDevice_t, nvmlMemory_v2_t *))

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t dev, nvmlMemory_t *m) {
  if (real_nvmlDeviceGetMemoryInfo() == NULL) return 999; // NVML_ERROR_UNKNOWN
  nvmlReturn_t r = real_nvmlDeviceGetMemoryInfo()(dev, m);
  if (r == NVML_SUCCESS && m != NULL && active()) report(m->total, m->free, &m->total, &m->free, &m->used);
  return r;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m) {
  if (real_nvmlDeviceGetMemoryInfo_v2() == NULL) return 999;
  nvmlReturn_t r = real_nvmlDeviceGetMemoryInfo_v2()(dev, m);
  if (r == NVML_SUCCESS && m != NULL && active()) {
    // The driver's reserved memory is not the share's: the share is all the tenant has.
    m->reserved = 0;
    report(m->total, m->free, &m->total, &m->free, &m->used);
  }
  return r;
}

// ---- the ways in: dlsym and cuGetProcAddress -------------------------------------------------

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags);
EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status);

// hooks maps a name, as exported and as cuGetProcAddress is asked for it (without the _v2
// suffix, from the CUDA version that introduced that ABI), to its wrapper.
static const struct hook {
  const char *exported; // the symbol's name in the library (dlsym, direct calls)
  const char *base;     // cuGetProcAddress's name; NULL for NVML
  int since;            // the cudaVersion from which base means exported
  void *fn;
  void *fn_ptsz; // the per-thread default stream variant, if any
} hooks[] = {
    {"cuInit", "cuInit", 2000, (void *)cuInit, NULL},
    {"cuMemGetInfo_v2", "cuMemGetInfo", 3020, (void *)cuMemGetInfo_v2, NULL},
    {"cuDeviceTotalMem_v2", "cuDeviceTotalMem", 3020, (void *)cuDeviceTotalMem_v2, NULL},
    {"cuMemAlloc_v2", "cuMemAlloc", 3020, (void *)cuMemAlloc_v2, NULL},
    {"cuMemAllocPitch_v2", "cuMemAllocPitch", 3020, (void *)cuMemAllocPitch_v2, NULL},
    {"cuMemAllocManaged", "cuMemAllocManaged", 6000, (void *)cuMemAllocManaged, NULL},
    {"cuMemFree_v2", "cuMemFree", 3020, (void *)cuMemFree_v2, NULL},
    {"cuMemAllocAsync", "cuMemAllocAsync", 11020, (void *)cuMemAllocAsync, (void *)cuMemAllocAsync_ptsz},
    {"cuMemAllocAsync_ptsz", NULL, 0, (void *)cuMemAllocAsync_ptsz, NULL},
    {"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync", 11020, (void *)cuMemAllocFromPoolAsync,
     (void *)cuMemAllocFromPoolAsync_ptsz},
    {"cuMemAllocFromPoolAsync_ptsz", NULL, 0, (void *)cuMemAllocFromPoolAsync_ptsz, NULL},
    {"cuMemFreeAsync", "cuMemFreeAsync", 11020, (void *)cuMemFreeAsync, (void *)cuMemFreeAsync_ptsz},
    {"cuMemFreeAsync_ptsz", NULL, 0, (void *)cuMemFreeAsync_ptsz, NULL},
    {"cuMemCreate", "cuMemCreate", 10020, (void *)cuMemCreate, NULL},
    {"cuMemRelease", "cuMemRelease", 10020, (void *)cuMemRelease, NULL},
    {"cuArrayCreate_v2", "cuArrayCreate", 3020, (void *)cuArrayCreate_v2, NULL},
    {"cuArray3DCreate_v2", "cuArray3DCreate", 3020, (void *)cuArray3DCreate_v2, NULL},
    {"cuArrayDestroy", "cuArrayDestroy", 2000, (void *)cuArrayDestroy, NULL},
    {"cuGetProcAddress", NULL, 0, (void *)cuGetProcAddress, NULL},
    {"cuGetProcAddress_v2", NULL, 0, (void *)cuGetProcAddress_v2, NULL},
    {"nvmlDeviceGetMemoryInfo", NULL, 0, (void *)nvmlDeviceGetMemoryInfo, NULL},
    {"nvmlDeviceGetMemoryInfo_v2", NULL, 0, (void *)nvmlDeviceGetMemoryInfo_v2, NULL},
    {NULL, NULL, 0, NULL, NULL},
};

static void *hook_exported(const char *name) {
  for (const struct hook *h = hooks; h->exported != NULL; h++)
    if (strcmp(h->exported, name) == 0) return h->fn;
  return NULL;
}

// hook_proc is the wrapper cuGetProcAddress hands out for base at that version and flags.
static void *hook_proc(const char *base, int version, cuuint64_t flags) {
  if (strcmp(base, "cuGetProcAddress") == 0)
    return version >= 12000 ? (void *)cuGetProcAddress_v2 : (void *)cuGetProcAddress;
  for (const struct hook *h = hooks; h->exported != NULL; h++) {
    if (h->base == NULL || strcmp(h->base, base) != 0 || version < h->since) continue;
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && h->fn_ptsz != NULL) return h->fn_ptsz;
    return h->fn;
  }
  return NULL;
}

EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version, cuuint64_t flags) {
  CUresult r = CALL(cuGetProcAddress, symbol, pfn, version, flags);
  if (r == CUDA_SUCCESS && symbol != NULL && pfn != NULL && *pfn != NULL) {
    void *w = hook_proc(symbol, version, flags);
    if (w != NULL) *pfn = w;
  }
  return r;
}

EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                                    CUdriverProcAddressQueryResult *status) {
  CUresult r = CALL(cuGetProcAddress_v2, symbol, pfn, version, flags, status);
  if (r == CUDA_SUCCESS && symbol != NULL && pfn != NULL && *pfn != NULL) {
    void *w = hook_proc(symbol, version, flags);
    if (w != NULL) *pfn = w;
  }
  return r;
}

// dlsym: a symbol the library really has, looked up by a name this file wraps, resolves to the
// wrapper. RTLD_NEXT lookups are answered relative to this library rather than the caller: for
// a library preloaded first that is the same list, less nothing the caller could have meant.
EXPORT void *dlsym(void *handle, const char *name) {
  void *p = real_dlsym(handle, name);
  if (p != NULL && (strncmp(name, "cu", 2) == 0 || strncmp(name, "nvml", 4) == 0)) {
    void *w = hook_exported(name);
    if (w != NULL) return w;
  }
  return p;
}

// ---- process life ----------------------------------------------------------------------------

static void after_fork_child(void) {
  // fcntl locks are not inherited: the child has no slot until it allocates. What the parent
  // allocated stays the parent's.
  my_slot = -1;
  local_bytes = 0;
  pthread_mutex_init(&mu, NULL);
  pthread_mutex_init(&tab_mu, NULL);
  free(tab);
  tab = NULL;
  tab_cap = tab_len = tab_used = 0;
}

__attribute__((constructor)) static void init(void) {
  if (!active()) return;
  force_env();
  pthread_atfork(NULL, NULL, after_fork_child);
}
