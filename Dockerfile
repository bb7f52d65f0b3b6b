# syntax=docker/dockerfile:1
#
# The task-operator image. It holds two static binaries:
#   /manager      the controller, the image's entrypoint;
#   /task-runner  the http runner that http Tasks' pods start (`/task-runner
#                 http`); the Deployment passes this same image to the manager
#                 as --runner-image (see config/manager).
#
#   docker build -t ghcr.io/taskops/task-operator:dev .        (make docker-build IMG=...)
#   docker buildx build --platform linux/amd64,linux/arm64 -t IMG --push .
#
# Needs BuildKit (the default builder of Docker 23+, and buildah/podman) for
# the cache mounts and the cross-compiling platform arguments.

# The builder runs on the build machine's platform and cross-compiles for the
# target one, so multi-arch builds need no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETARCH
WORKDIR /src

# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/

# CGO off: static binaries for distroless/static, which has no libc.
# Time zones: internal/scheduler imports time/tzdata, so the IANA zone database
# is embedded in /manager and Task spec.timeZone works although the final
# image has no /usr/share/zoneinfo.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags="-s -w" -o /out/task-runner ./cmd/task-runner

# distroless/static:nonroot: no shell, no package manager, CA certificates
# (the runner's https requests need them), and user 65532 "nonroot".
FROM gcr.io/distroless/static:nonroot
LABEL org.opencontainers.image.title="task-operator" \
      org.opencontainers.image.description="Kubernetes operator running Tasks (shell and http) as Jobs, with the http task runner" \
      org.opencontainers.image.source="https://github.com/taskops/task-operator"
WORKDIR /
COPY --from=builder /out/manager /manager
COPY --from=builder /out/task-runner /task-runner
# Numeric, so Kubernetes can verify runAsNonRoot without an /etc/passwd lookup.
USER 65532:65532
ENTRYPOINT ["/manager"]
