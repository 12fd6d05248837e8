# One image with both Phalanx binaries:
#   /usr/local/bin/phalanx-scheduler  (kube-scheduler + Phalanx plugins; the entrypoint)
#   /usr/local/bin/phalanx-controller (Workload/Job controllers)
# Build with `make image` (IMAGE=registry/phalanx:tag to name it).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/phalanx-scheduler ./cmd/phalanx-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/phalanx-scheduler /out/phalanx-controller /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/phalanx-scheduler"]
