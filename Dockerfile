# Parley's image: Node 24 runs the TypeScript sources as they are (types stripped natively,
# no build step). Used by docker-compose.yml; checked by test/Operations/Stack.test.ts.
# Keep the tag equal to the `node` dependency of package.json (O7), so the image runs the
# Node the tests ran on.
FROM node:24.21.0-bookworm-slim

ENV NODE_ENV=production
WORKDIR /app

# Production dependencies only. The base image's Node runs the app: --ignore-scripts keeps the
# `node` dependency's install script from fetching a second Node binary, and skips the one of
# @embedded-postgres/<platform>, which links the embedded PostgreSQL's libraries. The image
# runs against DATABASE_URL (O2) and never starts the embedded server, so that script is not
# needed; without DATABASE_URL the container cannot start its own PostgreSQL.
# No --omit=optional: embedded-postgres imports its platform package as soon as it is
# loaded, which Parley always does, and start-up fails with ERR_MODULE_NOT_FOUND without it.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# Owned by root, read-only for the `node` user that runs them.
COPY bin ./bin
COPY migrations ./migrations
COPY src ./src

USER node
EXPOSE 8080
# /healthz responds while the process is alive (O4). The slim image has no curl: Node's fetch.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The command of `npm start`, V8 flags included (bench/README.md "export"; checked by Stack.test.ts).
CMD ["node", "--max-semi-space-size=32", "src/main.ts"]
