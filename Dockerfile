# Static strata binaries on a distroless base, as a non-root user: the
# strata front and the programs it runs (strata-engine, strata-full,
# strata-iceberg), and the compactor Job. The build context includes .git,
# so Go stamps the module version and VCS revision into every binary
# (`strata version`, `strata-compactor --version`); a context without it
# can pass them:
#   docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD) .
FROM golang:1.26 AS build
ARG VERSION=""
ARG REVISION=""
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN set -e; pkg=github.com/stratadb/strata/internal/buildinfo; \
    ldflags="-s -w"; vcs=false; if [ -d .git ]; then vcs=true; fi; \
    if [ -n "$VERSION" ]; then ldflags="$ldflags -X $pkg.version=$VERSION"; fi; \
    if [ -n "$REVISION" ]; then ldflags="$ldflags -X $pkg.revision=$REVISION"; fi; \
    CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags="$ldflags" -o /out/strata ./cmd/strata; \
    CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags="$ldflags" -o /out/strata-engine ./cmd/strata-engine; \
    CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags="$ldflags" -o /out/strata-full ./cmd/strata-full; \
    CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags="$ldflags" -o /out/strata-compactor ./cmd/strata-compactor; \
    CGO_ENABLED=0 go build -buildvcs=$vcs -trimpath -ldflags="$ldflags" -o /out/strata-iceberg ./cmd/strata-iceberg; \
    /out/strata version; /out/strata-full version

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /out/strata-engine /out/strata-full /out/strata-compactor /out/strata-iceberg /usr/local/bin/
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/strata"]
