# Static strata and strata-compactor binaries on a distroless base, as a
# non-root user.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/strata ./cmd/strata \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/strata-compactor ./cmd/strata-compactor

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /out/strata-compactor /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/strata"]
