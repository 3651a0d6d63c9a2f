/**
 * The featureless proxy the benchmark compares Tollgate with: Fastify receives the request,
 * undici forwards it to the upstream over a keep-alive pool, the response streams back as it is.
 * No auth, no validation, no accounting. `node bench/gateway/featureless-proxy.ts UPSTREAM_ORIGIN`
 * prints `{"port": N}`.
 */
import Fastify from "fastify";
import { Pool } from "undici";

const upstream = process.argv[2];
if (upstream === undefined) throw new Error("usage: featureless-proxy.ts UPSTREAM_ORIGIN");
const pool = new Pool(upstream, { pipelining: 1, keepAliveTimeout: 60_000 });
const app = Fastify({ logger: false });

app.post("/v1/chat/completions", async (request, reply) => {
  const response = await pool.request({
    method: "POST",
    path: "/v1/chat/completions",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(request.body),
  });
  const contentType = response.headers["content-type"];
  reply.code(response.statusCode);
  if (typeof contentType === "string") reply.header("content-type", contentType);
  return reply.send(response.body);
});

await app.listen({ host: "127.0.0.1", port: 0 });
const address = app.server.address();
process.stdout.write(
  `${JSON.stringify({ port: typeof address === "object" && address !== null ? address.port : 0 })}\n`,
);
process.on("SIGTERM", () => process.exit(0));
