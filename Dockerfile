# syntax=docker/dockerfile:1

# Build: a static binary (no cgo), reproducible paths, version stamped.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
        -o /out/xds-relay ./cmd/xds-relay \
 && sed -e 's/^listen: "127.0.0.1:18000"/listen: ":18000"/' \
        -e 's/^admin: "127.0.0.1:18001"/admin: ":18001"/' \
        config/example.yaml > /out/config.yaml \
 && /out/xds-relay validate --config /out/config.yaml

# Run: nothing but the binary and a default config, as a non-root user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/xds-relay /xds-relay
# root's and writable by nobody else: the relay refuses a config file
# another user may have written (docs/operations.md, "Reload").
COPY --from=build --chmod=0644 /out/config.yaml /etc/xds-relay/config.yaml
USER 65532:65532
EXPOSE 18000 18001
ENTRYPOINT ["/xds-relay"]
CMD ["serve", "--config", "/etc/xds-relay/config.yaml"]
