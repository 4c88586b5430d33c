# One image for every Tethys role (see docker-compose.yml, docs/deploy.md).
# Build: docker build -t tethys .
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin tethys

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/tethys /usr/local/bin/tethys
COPY docker/entrypoint.sh /usr/local/bin/entrypoint.sh
VOLUME /data
# FE: MySQL 9030, HTTP 8030, RPC 9020; BE: RPC 9060, HTTP 8040.
EXPOSE 9030 8030 9020 9060 8040
ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
CMD ["fe"]
