# syntax=docker/dockerfile:1
# Build: a static pvguard binary.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/pvguard/pvguard/cmd/pvguard/app.Version=${VERSION}" -o /out/pvguard ./cmd/pvguard

# Run: distroless, non-root; pvguard writes nothing to its root filesystem (certificates come
# from a mounted Secret via --cert-dir, self-signed ones go to a temp dir that can be an emptyDir).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/pvguard /pvguard
USER 65532:65532
ENTRYPOINT ["/pvguard"]
CMD ["serve"]
