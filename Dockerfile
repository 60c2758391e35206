# headroom's image: the `headroom` binary as the entrypoint, run as a
# non-root user on a read-only root file system (the chart sets
# readOnlyRootFilesystem; nothing is written outside mounted volumes).
#
#   docker build -t ghcr.io/headroom-dev/headroom:0.1.0 .                 # NVML, for the exporter
#   docker build --target static -t ghcr.io/headroom-dev/headroom:0.1.0-static .
#
# NVML: the exporter reads GPU memory through NVIDIA's go-nvml bindings,
# which need cgo: they dlopen libnvidia-ml.so.1 at run time (the NVIDIA
# container runtime mounts it from the node's driver) and so need a C
# library with dlopen. They are compiled in only with the nvml build tag
# (a plain `go build` leaves them out, and with them the C compiler's
# warnings about go-nvml's headers, and reads GPUs through nvidia-smi).
# The default image is therefore a cgo build with -tags nvml on
# distroless/base (glibc, no shell, no package manager), linked only
# against glibc; nothing of NVIDIA is in the image. The `static` target
# is a CGO_ENABLED=0 binary on distroless/static (telemetry's
# nvml_off.go): no NVML, so the exporter serves only vLLM's gauges there;
# the webhook and audit are the same in both (ko, with .ko.yaml, builds the
# static one the same way: CGO_ENABLED=0). `ldd` on the NVML binary lists
# only libc and the loader. The build stage and the
# runtime base are the same Debian release, so the glibc the binary was
# linked against is the one it runs with.

ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# go-nvml's cgo headers mark old NVML calls deprecated; the warnings are noise.
ENV CGO_CFLAGS="-Wno-deprecated-declarations" GOFLAGS=-trimpath
RUN CGO_ENABLED=1 go build -tags nvml -ldflags="-s -w" -o /out/nvml/headroom ./cmd/headroom \
 && CGO_ENABLED=0 go build -ldflags="-s -w" -o /out/static/headroom ./cmd/headroom

FROM gcr.io/distroless/static-debian12:nonroot AS static
COPY --from=build /out/static/headroom /headroom
USER 65532:65532
ENTRYPOINT ["/headroom"]

FROM gcr.io/distroless/base-debian12:nonroot
COPY --from=build /out/nvml/headroom /headroom
USER 65532:65532
ENTRYPOINT ["/headroom"]
