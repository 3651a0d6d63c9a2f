import type { Writable } from "node:stream";
import Fastify, { type FastifyInstance, LogController } from "fastify";
import { errorHeaders, normalizeError, toWireError } from "../../src/api/errors.ts";
import { type AdminRoutesOptions, registerAdminRoutes } from "../../src/api/routes/admin.ts";
import type { AuthenticatedKey } from "../../src/auth/authenticated-key.ts";
import type { Authenticator } from "../../src/auth/authenticator.ts";
import { AppError } from "../../src/errors/app-error.ts";

/**
 * The app as `buildApp` assembles it for the admin API: JSON only, the one error mapping, and an
 * authenticated scope (401 before anything else) in which the admin routes are registered with
 * `routes` (the key of each request from `authenticator`). `logs`: where the JSON log lines go.
 */
export function buildAdminTestApp(options: {
  authenticator: Authenticator;
  routes: Omit<AdminRoutesOptions, "getKey">;
  logs?: Writable;
}): FastifyInstance {
  const keys = new WeakMap<object, AuthenticatedKey>();
  const instance = Fastify({
    ...(options.logs === undefined
      ? {}
      : {
          logger: { level: "info", stream: options.logs },
          logController: new LogController({ disableRequestLogging: true }),
        }),
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
  });
  instance.removeAllContentTypeParsers();
  instance.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    try {
      done(null, JSON.parse(typeof body === "string" ? body : body.toString("utf8")));
    } catch {
      done(new AppError("invalid_json", "The request body is not valid JSON."), undefined);
    }
  });
  instance.setErrorHandler((error, _request, reply) => {
    const appError = normalizeError(error);
    void reply.code(appError.status).headers(errorHeaders(appError)).send(toWireError(appError));
  });
  instance.register(async (authenticated) => {
    authenticated.addHook("onRequest", async (request) => {
      keys.set(request, await options.authenticator.authenticate(request.headers.authorization));
    });
    registerAdminRoutes(authenticated, {
      ...options.routes,
      getKey: (request) => {
        const key = keys.get(request);
        if (key === undefined) throw new Error("route reached without authentication");
        return key;
      },
    });
  });
  return instance;
}
