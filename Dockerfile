# The service image: Node 20 (uWebSockets.js ships native binaries for Node 16/18/20 only), TypeScript run
# through tsx exactly as `npm start` does. Native deps (lmdb, uWebSockets.js) come as prebuilt binaries for
# linux x64/arm64 on glibc, so no compiler toolchain is installed. If `npm ci` ever has to build one from
# source, add before it:  RUN apt-get update && apt-get install -y --no-install-recommends python3 make g++
FROM node:20-bookworm-slim

WORKDIR /app

COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

# src imports the actor definitions from ../actors
COPY tsconfig.json ./
COPY actors ./actors
COPY src ./src
# the operator dashboard's static files, served at /dashboard
COPY dashboard ./dashboard

ENV NODE_ENV=production \
    DATA_DIR=/data \
    HOST=0.0.0.0 \
    PORT=3000

# the embedded (LMDB) store lives in /data; a named volume mounted here starts out owned by `node`
RUN mkdir -p /data && chown node:node /data
VOLUME /data
USER node

EXPOSE 3000

HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/health').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"

CMD ["node", "--import", "tsx", "src/main.ts"]
