// Package shim delivers libfairway-share.so (lib/share.c), the library that makes a GPU share look,
// from inside the container that holds it, like a GPU of the share's size: nvidia-smi, NVML's
// memory info and cuMemGetInfo (so cudaMemGetInfo and torch.cuda.mem_get_info) report the share
// as the total and the container's own allocations as used, and allocations past the share
// fail with CUDA_ERROR_OUT_OF_MEMORY. No image changes: the library is loaded into every
// process through /etc/ld.so.preload.
//
// # Delivery
//
// The gpu-agent's device plugin for the share resource is the only thing that puts it into a
// container, so pods holding whole GPUs (NVIDIA's device plugin) never get it. At start the
// agent calls Install (the library and the preload file under HostDir); for each share
// container, Allocate calls Prepare and answers with the mounts it returns:
//
//	HostDir/shares/<id>/      -> ContainerDir (read-only): the library and share.conf
//	HostDir/ld.so.preload     -> /etc/ld.so.preload (read-only): names ContainerDir's library
//
// Mounts in a device plugin's Allocate response are the kubelet's, not volumes of the pod spec,
// so Pod Security (restricted included) has nothing to refuse, and a tenant cannot change
// them: they are read-only and the container has no CAP_SYS_ADMIN to unmount them. The share's
// numbers come from share.conf, not from the environment, for the same reason.
//
// # What it does not guarantee
//
// It is a convenience and a second line, not the boundary. A static binary, a process run by a
// loader that does not read /etc/ld.so.preload (musl's, or one the tenant brings), or code that
// drives /dev/nvidia* with its own ioctls never loads it. What holds against those is below
// the process: the share's MPS server with its server-side limit, MIG, or the driver's
// per-cgroup memory limit; docs/isolation.md says what each mode guarantees. The library counts
// what the container asked the driver for, not the driver's own overhead per context (a few
// hundred MiB), and it applies one limit to every GPU the container sees (a share's container
// sees one).
//
// The tests build the library, a mock libcuda.so.1 and libnvidia-ml.so.1 and a client with gcc
// alone (testdata/), and run the client through all three ways into the driver: direct calls,
// dlsym and cuGetProcAddress.
package shim
