# The one fairway image: `fairway scheduler`, `fairway webhook` and `fairway agent` (the chart runs
# each with its own arguments). The agent loads NVML through cgo (go-nvml), so the binary is
# dynamically linked against glibc and the runtime image must have it; the NVIDIA driver's
# libraries and MPS binaries come from the node through the nvidia container runtime.
#
# Build: make image (docker build --build-arg VERSION=<version> -t ghcr.io/fairway-sched/fairway:<version> .)
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# VERSION is what `fairway version` prints (make image passes git describe).
ARG VERSION=devel
RUN CGO_ENABLED=1 CGO_CFLAGS="-O2 -Wno-deprecated-declarations" \
    go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/fairway ./cmd/fairway
# The library a GPU share's container loads (gpu-agent/shim); the agent copies it to the node.
RUN gcc -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden -o /out/libfairway-share.so gpu-agent/shim/lib/share.c -ldl -lpthread

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/fairway /usr/local/bin/fairway
COPY --from=build /out/libfairway-share.so /usr/local/lib/fairway/libfairway-share.so
ENTRYPOINT ["/usr/local/bin/fairway"]
