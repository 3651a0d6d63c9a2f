/**
 * The routes for operators and their tools, outside the authenticated API: `/health`, `/ready`,
 * `/metrics` (behind its own key when one is set) and `/openapi.json`. Kept apart from
 * build-app.ts, which registers them where it always did, before the authenticated scope.
 */
import { hash, timingSafeEqual } from "node:crypto";
import type { FastifyInstance } from "fastify";
import packageJson from "../../../package.json" with { type: "json" };
import { splitAuthorization } from "../../auth/authenticator.ts";
import { AppError } from "../../errors/app-error.ts";
import type { Metrics } from "../../metrics/metrics.ts";
import type { AppDependencies } from "../build-app.ts";
import { createOpenApiDocument } from "../create-openapi-document.ts";
import type { InFlightRequests } from "../in-flight-requests.ts";
import { readAuthorization } from "../read-authorization.ts";

/**
 * Whether the `Authorization` header carries `secret` as its bearer token, read as the API reads
 * one (scheme in any case, spaces around the token). The two are compared as SHA-256 digests, of
 * equal length whatever was sent, so the time taken tells nothing of the secret's length.
 */
function isBearerOf(header: string | undefined, secret: string): boolean {
  const parts = splitAuthorization(header);
  if (parts === undefined || parts.scheme.toLowerCase() !== "bearer" || parts.token === "") return false;
  return timingSafeEqual(hash("sha256", parts.token, "buffer"), hash("sha256", secret, "buffer"));
}

export interface OperationRoutesOptions {
  /** Read on each request: `checkReady` for `/ready`, `metricsKey` for `/metrics`. */
  dependencies: Pick<AppDependencies, "checkReady" | "metricsKey">;
  /** A server that drains is not ready. */
  inFlight: InFlightRequests;
  /** What `/metrics` renders. */
  metrics: Metrics;
}

/** Registers `/health`, `/ready`, `/metrics` and `/openapi.json` on `app`, in that order. */
export function registerOperationRoutes(app: FastifyInstance, options: OperationRoutesOptions): void {
  const { dependencies, inFlight, metrics } = options;
  app.get("/health", async () => ({ status: "ok" }));
  app.get("/ready", async (_request, reply) => {
    const readiness = inFlight.closing
      ? { ready: false, reasons: ["shutting down"] }
      : ((await dependencies.checkReady?.()) ?? { ready: true, reasons: [] });
    void reply.code(readiness.ready ? 200 : 503);
    return { status: readiness.ready ? "ready" : "not_ready", reasons: readiness.reasons };
  });
  app.get("/metrics", async (request, reply) => {
    const metricsKey = dependencies.metricsKey;
    if (metricsKey !== undefined && !isBearerOf(readAuthorization(request.raw), metricsKey)) {
      throw new AppError("invalid_api_key", "GET /metrics needs 'Authorization: Bearer <metrics_key>'.");
    }
    const rendered = await metrics.render();
    void reply.type(rendered.contentType);
    return rendered.body;
  });
  const openApiDocument = JSON.stringify(createOpenApiDocument({ version: packageJson.version }));
  app.get("/openapi.json", async (_request, reply) => {
    void reply.type("application/json; charset=utf-8");
    return openApiDocument;
  });
}
