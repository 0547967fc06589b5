// A stand-in for libnvidia-ml.so.1: one GPU of 80 GiB of which neighbours use 30 GiB, so the
// shim's tests can tell the driver's numbers from the share's.
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;

#define TOTAL (80ULL << 30)
#define USED (30ULL << 30)
#define RESERVED (512ULL << 20)

int nvmlInit_v2(void) { return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = 1; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) { *d = (void *)0x1; return i == 0 ? 0 : 2; }
int nvmlDeviceGetMemoryInfo(void *d, nvmlMemory_t *m) {
  (void)d;
  m->total = TOTAL;
  m->used = USED;
  m->free = TOTAL - USED;
  return 0;
}
int nvmlDeviceGetMemoryInfo_v2(void *d, nvmlMemory_v2_t *m) {
  (void)d;
  if (m->version == 0) return 25; // NVML_ERROR_ARGUMENT_VERSION_MISMATCH
  m->total = TOTAL;
  m->reserved = RESERVED;
  m->used = USED;
  m->free = TOTAL - USED - RESERVED;
  return 0;
}
