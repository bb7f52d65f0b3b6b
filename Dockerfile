# syntax=docker/dockerfile:1
#
# The task-operator image, for users with a container engine. `make image`
# builds the same image without one (hack/image); hack/image/layout.go holds
# the one list of what goes into it, and hack/image/layout_test.go fails when
# this file drifts from it (paths, user, entrypoint, labels, passwd).
#
# It holds two static binaries:
#   /manager      the controller, the image's entrypoint;
#   /task-runner  the http runner that http Tasks' pods start (`/task-runner
#                 http`); the Deployment passes this same image to the manager
#                 as --runner-image (see config/manager).
# plus the CA bundle (the runner's https requests), a passwd/group naming the
# non-root user 65532, its home and /tmp. Time zones are embedded in /manager
# (internal/scheduler imports time/tzdata).
#
#   docker build --build-arg VERSION=v0.2.0 -t ghcr.io/taskops/task-operator:v0.2.0 .   (make docker-build)
#   docker buildx build --platform linux/amd64,linux/arm64 -t IMG --push .
#
# Needs BuildKit (the default builder of Docker 23+, and buildah/podman) for
# the cache mounts and the cross-compiling platform arguments.

# The builder runs on the build machine's platform and cross-compiles for the
# target one, so multi-arch builds need no emulation.
FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETARCH
ARG VERSION=v0.2.0
WORKDIR /src

# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/

# CGO off: static binaries for an image with no libc. The version pins the
# runner image the manager defaults to.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags="-s -w -X github.com/taskops/task-operator/internal/version.Version=${VERSION}" -o /out/manager ./cmd/manager && \
    CGO_ENABLED=0 GOOS=linux GOARCH=${TARGETARCH} \
      go build -trimpath -ldflags="-s -w -X github.com/taskops/task-operator/internal/version.Version=${VERSION}" -o /out/task-runner ./cmd/task-runner

# The user 65532 "nonroot" and nothing else: no root login in the image.
RUN mkdir -p /out/etc /out/home/nonroot /out/tmp && \
    printf 'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/out/etc/passwd && \
    printf 'nonroot:x:65532:\n' >/out/etc/group && \
    chmod 700 /out/home/nonroot && chmod 1777 /out/tmp

FROM scratch
ARG VERSION=v0.2.0
ARG REVISION=
LABEL org.opencontainers.image.title="task-operator" \
      org.opencontainers.image.description="Kubernetes operator running Tasks (shell and http) as Jobs, with the http task runner" \
      org.opencontainers.image.source="https://github.com/taskops/task-operator" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=builder /out/manager /manager
COPY --from=builder /out/task-runner /task-runner
COPY --from=builder /etc/ssl/certs/ca-certificates.crt /etc/ssl/certs/ca-certificates.crt
COPY --from=builder /out/etc/passwd /etc/passwd
COPY --from=builder /out/etc/group /etc/group
COPY --from=builder --chown=65532:65532 /out/home/nonroot /home/nonroot
COPY --from=builder /out/tmp /tmp
ENV SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
WORKDIR /
# Numeric, so Kubernetes can verify runAsNonRoot without an /etc/passwd lookup.
USER 65532:65532
ENTRYPOINT ["/manager"]
