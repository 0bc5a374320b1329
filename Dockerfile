# syntax=docker/dockerfile:1
# One image for every service; the command picks the service (k8s/base sets workingDir and command):
#   docker build -t messaging-platform .
#   docker run -w /app/services/messaging messaging-platform node dist/index.js
# Node 20 (engines ">=20.19"; the same major as CI). The runtime file list is infra/image-files.sh,
# which packages/deploy-check's image test runs too and then starts a service from.

FROM node:20.20-bookworm-slim AS build
WORKDIR /src
# The lockfile's npm (package.json "packageManager"); `npm ci` of npm 11.19 rejects its own lockfile, hence install.
RUN npm install -g npm@11.19.1 --no-audit --no-fund
COPY . .
ENV TURBO_TELEMETRY_DISABLED=1
RUN npm install --no-audit --no-fund \
 && npx turbo run build --output-logs=errors-only \
 && bash infra/image-files.sh /src /app

FROM node:20.20-bookworm-slim
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    SIM_HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app /app
# The image's files belong to root and are read-only for the process; it runs as `node` (uid 1000).
USER 1000:1000
EXPOSE 8080
WORKDIR /app/services/gateway
CMD ["node", "--max-old-space-size=128", "dist/index.js"]
