# syntax=docker/dockerfile:1
#
# The pvguard image: a static binary on distroless, running as a non-root user.
#
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) -t pvguard .
#
# test/image checks this file without a Docker engine: go test ./test/image/

# Build stage. The tag names the exact Go release of go.mod's go directive: the golang images set
# GOTOOLCHAIN=local, so an older cached 1.26.x image would refuse to build rather than upgrade.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, in their own layer: it is reused until go.mod or go.sum changes.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/pvguard/pvguard/internal/cli.Version=${VERSION}" -o /out/pvguard ./cmd/pvguard

# Run stage. There is no shell in this image, so ENTRYPOINT and CMD use the exec form.
# pvguard writes nothing to its root filesystem, so it runs with readOnlyRootFilesystem: serving
# certificates come from a mounted Secret (--cert-dir) or, self-managed, from the API and stay in
# memory (--cert-secret); only --self-signed writes, to $TMPDIR, which then needs a writable
# volume (an emptyDir at /tmp).
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="pvguard" \
      org.opencontainers.image.description="Admission webhook server for Kubernetes PersistentVolumes, PersistentVolumeClaims and StorageClasses" \
      org.opencontainers.image.source="https://github.com/pvguard/pvguard" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/pvguard /pvguard
# 65532 is distroless's "nonroot" user, given as numbers so that runAsNonRoot can be verified.
USER 65532:65532
# Webhooks, /healthz, /readyz, /metrics and the dashboard (serve --listen).
EXPOSE 9443
ENTRYPOINT ["/pvguard"]
CMD ["serve"]
