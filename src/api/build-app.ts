import { randomBytes } from "node:crypto";
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from "fastify";
import { type ChatAdmission, unlimitedAdmission } from "../chat/chat-admission.ts";
import { ChatService } from "../chat/chat-service.ts";
import type { RequestKey } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
import type { ModelRegistry } from "../models/model-registry.ts";
import { errorHeaders, normalizeError, toWireError } from "./errors.ts";
import { registerChatCompletionRoutes } from "./routes/chat-completions.ts";
import { registerModelRoutes } from "./routes/models.ts";

/** Everything the HTTP edge needs; `server.ts` and the tests build it. */
export interface AppDependencies {
  registry: ModelRegistry;
  /** Resolves the `Authorization` header to a key, or throws `invalid_api_key`. */
  authenticate: (authorization: string | undefined) => Promise<RequestKey>;
  /** Limits and billing; the default admits everything for free. */
  admission?: ChatAdmission;
  /** Largest accepted request body, in bytes. Default 8 MiB. */
  bodyLimitBytes?: number;
  /** A pino logger; default: no logs. */
  logger?: FastifyBaseLogger;
}

const requestKeys = new WeakMap<object, RequestKey>();

function getKey(request: object): RequestKey {
  const key = requestKeys.get(request);
  if (key === undefined) throw new Error("route reached without authentication");
  return key;
}

const REQUEST_ID_PATTERN = /^[\w.:-]{1,128}$/;

/** The client's `x-request-id` when it is sane, else a new one. */
function createRequestId(header: string | string[] | undefined): string {
  if (typeof header === "string" && REQUEST_ID_PATTERN.test(header)) return header;
  return `req_${randomBytes(12).toString("hex")}`;
}

/** Builds the Fastify app: routes, authentication, JSON parsing and the one error mapping. */
export function buildApp(dependencies: AppDependencies): FastifyInstance {
  const app = Fastify({
    ...(dependencies.logger === undefined ? { logger: false } : { loggerInstance: dependencies.logger }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: dependencies.bodyLimitBytes ?? 8 * 1024 * 1024,
    genReqId: (request) => createRequestId(request.headers["x-request-id"]),
    requestIdHeader: false,
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
    routerOptions: { ignoreTrailingSlash: true },
  });

  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (_request, body, done) => {
    const text = typeof body === "string" ? body : body.toString("utf8");
    if (text.trim() === "") {
      done(new AppError("invalid_json", "The request body is empty; send a JSON object."), undefined);
      return;
    }
    try {
      done(null, JSON.parse(text));
    } catch (error) {
      done(
        new AppError("invalid_json", `The request body is not valid JSON (${(error as Error).message}).`),
        undefined,
      );
    }
  });

  app.addHook("onRequest", async (request, reply) => {
    reply.header("x-request-id", request.id);
  });

  app.setErrorHandler((error, request, reply) => {
    const appError = normalizeError(error);
    if (appError.code === "internal_error") request.log.error({ err: error }, "request failed");
    void reply.code(appError.status).headers(errorHeaders(appError)).send(toWireError(appError));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new AppError(
      "not_found",
      `Unknown request URL: ${request.method} ${request.url.split("?")[0]}.`,
    );
    void reply.code(error.status).send(toWireError(error));
  });

  app.get("/health", async () => ({ status: "ok" }));

  app.register(async (v1) => {
    // The key comes before anything about the body (SPEC §11): onRequest runs before parsing.
    v1.addHook("onRequest", async (request) => {
      requestKeys.set(request, await dependencies.authenticate(request.headers.authorization));
    });
    const chat = new ChatService({
      registry: dependencies.registry,
      admission: dependencies.admission ?? unlimitedAdmission,
    });
    registerChatCompletionRoutes(v1, { chat, getKey });
    registerModelRoutes(v1, { registry: dependencies.registry, getKey });
  });

  return app;
}
