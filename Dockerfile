# syntax=docker/dockerfile:1
#
# Tollgate container: Node.js 24 runs the TypeScript sources as they are (type stripping), so
# there is no build step, only production dependencies.
#
#   docker build -t tollgate .
#   docker run -p 8080:8080 -v tollgate-models:/models -v tollgate-data:/data tollgate
#
# Models named by URI (hf:ORG/REPO:QUANT, https://...) are downloaded into /models when the
# server starts; pre-fill the volume with `docker run --rm -v tollgate-models:/models tollgate
# node src/cli.ts models pull MODEL_ID` on a machine with network access.

FROM node:24-slim AS dependencies
WORKDIR /app
# node-llama-cpp ships prebuilt llama.cpp binaries as optional packages; this makes its
# postinstall step skip any download or source build (the server itself never builds either).
ENV NODE_LLAMA_CPP_SKIP_DOWNLOAD=true
COPY package.json package-lock.json ./
RUN npm ci --omit=dev && npm cache clean --force
# The CUDA and Vulkan builds add about 600 MB; a CPU image drops them. Build with
# `--build-arg GPU_BINARIES=keep` (and run with a GPU runtime) to keep them.
ARG GPU_BINARIES=drop
RUN if [ "$GPU_BINARIES" = "drop" ]; then \
      rm -rf node_modules/@node-llama-cpp/*-cuda* node_modules/@node-llama-cpp/*-vulkan*; \
    fi

FROM node:24-slim
# jemalloc in place of glibc's malloc: after a burst of requests glibc keeps the memory it freed
# (an idle server stayed at 177-199 MiB of RSS, 120 after glibc's malloc_trim), jemalloc gives it
# back (117-142 MiB; no throughput lost in side-by-side runs). A bare name: found on any arch.
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 \
    && rm -rf /var/lib/apt/lists/*
ENV LD_PRELOAD=libjemalloc.so.2 \
    NODE_ENV=production \
    NODE_LLAMA_CPP_SKIP_DOWNLOAD=true \
    TOLLGATE_MODELS_DIR=/models \
    TOLLGATE_DATABASE_URL=sqlite:/data/tollgate.db \
    TOLLGATE_CHARGE_JOURNAL_DIR=/data \
    HOST=0.0.0.0 \
    PORT=8080
WORKDIR /app
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json package-lock.json ./
COPY src ./src
# The official image's unprivileged `node` user (uid 1000) owns only the two volumes.
RUN mkdir -p /models /data && chown node:node /models /data
USER node
VOLUME ["/models", "/data"]
EXPOSE 8080
# The health check asks the address the server listens on: 127.0.0.1 where it listens on every
# address (HOST 0.0.0.0 or ::), else HOST itself (`-e HOST=10.0.0.5` does not listen on 127.0.0.1).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "const h = process.env.HOST || '0.0.0.0'; const host = h === '0.0.0.0' || h === '::' ? '127.0.0.1' : h.includes(':') ? `[${h}]` : h; fetch(`http://${host}:${process.env.PORT || 8080}/health`).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# The address comes from HOST, so that `-e HOST=...` (or a mounted config without HOST) decides it.
CMD ["node", "src/cli.ts", "serve"]
