# One image with both Phalanx binaries:
#   /usr/local/bin/phalanx-scheduler  (kube-scheduler + Phalanx plugins; the entrypoint)
#   /usr/local/bin/phalanx-controller (Workload/Job controllers)
# `make image` builds the same image without docker (FROM scratch, see the
# Makefile); with docker: make docker-image IMAGE=registry/phalanx:tag.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY apis/ apis/
COPY cmd/ cmd/
COPY pkg/ pkg/
# The flags of `make image` (see the Makefile), so both give the same binaries.
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/phalanx-sched/phalanx/pkg/version.Version=${VERSION} -X github.com/phalanx-sched/phalanx/pkg/version.Commit=${COMMIT}" \
      -o /out/ ./cmd/phalanx-scheduler ./cmd/phalanx-controller

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/phalanx-scheduler /out/phalanx-controller /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/phalanx-scheduler"]
