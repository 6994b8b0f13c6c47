# The service's image (docs/how-to/container.md). Debian, so glibc: the embedded PostgreSQL's
# binaries need it. Its one build step is deploy/install.sh, which CI runs on a fresh checkout
# (tests/deploy/image.test.ts), so what is built here is what the tests start.
FROM node:24-bookworm-slim

# .dockerignore lets in only what deploy/install.sh copies.
COPY . /src
RUN NPM_CONFIG_CACHE=/tmp/npm-cache sh /src/deploy/install.sh /app node && rm -rf /src /tmp/npm-cache

WORKDIR /app
USER node
ENV NODE_ENV=production PORT=3000 SHUTDOWN_DRAIN_MS=5000
EXPOSE 3000
# /healthz answers while the process serves, without touching the database (docs/reference/api.md, "Health checks").
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# One process, which gets the runtime's SIGTERM itself: no npm, no shell in between (docs/how-to/load-balancer.md, "Running under a supervisor").
# --max-semi-space-size: docs/reference/configuration.md, "Node.js flags".
CMD ["node", "--max-semi-space-size=8", "server.ts"]
