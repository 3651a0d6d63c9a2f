import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from "fastify";
import { type ChatAdmission, unlimitedAdmission } from "../chat/chat-admission.ts";
import { ChatService } from "../chat/chat-service.ts";
import type { RequestKey } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
import type { KeyLimits } from "../limits/key-limits.ts";
import { RateLimitsUnavailableError } from "../limits/rate-limits-unavailable-error.ts";
import { Metrics } from "../metrics/metrics.ts";
import { getModelStatus, type ModelRegistry } from "../models/model-registry.ts";
import {
  answerClientError,
  boundUnreadBody,
  closeAfterUnreadBody,
  refuseConnect,
  refusedByClientError,
} from "./answer-client-error.ts";
import { BodyBudget, type BodyHold, carriesBody, countHeldBody } from "./body-budget.ts";
import { awaitsContinue, forwardExpectations, refuseRequestHead } from "./check-request-head.ts";
import { allowPageToRead, registerCorsPreflight } from "./cors.ts";
import { createRequestId } from "./create-request-id.ts";
import { errorHeaders, normalizeError, toWireError } from "./errors.ts";
import { InFlightRequests, shuttingDownError } from "./in-flight-requests.ts";
import { normalizeRequestTarget } from "./normalize-request-target.ts";
import { notFoundError } from "./not-found-error.ts";
import { readAuthorization } from "./read-authorization.ts";
import { createRequestRecorder } from "./record-request.ts";
import { registerJsonBodyParser } from "./register-json-body-parser.ts";
import { annotate, getKey, stateOf } from "./request-state.ts";
import { CHAT_COMPLETIONS_PATH, registerChatCompletionRoutes } from "./routes/chat-completions.ts";
import { registerModelRoutes } from "./routes/models.ts";
import { registerOperationRoutes } from "./routes/operation-routes.ts";
import { throttleLog } from "./throttle-log.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** What its body holds of the body budget; `null` without a body (or before its key is accepted). */
    bodyHold: BodyHold | null;
  }
}

/** Everything the HTTP edge needs; `server.ts` and the tests build it. */
export interface AppDependencies {
  registry: ModelRegistry;
  /** Resolves the `Authorization` header to a key, or throws `invalid_api_key`. */
  authenticate: (authorization: string | undefined) => Promise<RequestKey>;
  /** Limits and billing; the default admits everything for free. */
  admission?: ChatAdmission;
  /** Reports a limited key's rate-limit headers on every response. */
  keyLimits?: KeyLimits;
  /** Registers the `/admin` routes inside the authenticated scope (the admin API). */
  registerAdminRoutes?: (app: FastifyInstance, getKey: (request: object) => RequestKey) => void;
  /** Largest accepted request body, in bytes. Default 8 MiB. */
  bodyLimitBytes?: number;
  /** The bytes of request bodies held at once; default {@link BodyBudget.forHeap}. */
  bodyBudgetBytes?: number;
  /** Registers a listener of keys that stopped working (revoked): their bodies being sent are cut. */
  watchRevocations?: (listener: (publicId: string) => void) => void;
  /** When set, `/metrics` needs `Authorization: Bearer <metricsKey>`; otherwise it is open. */
  metricsKey?: string | undefined;
  /** Readiness for `/ready`: the store answers and no local model is still loading. */
  checkReady?: () => Promise<{ ready: boolean; reasons: string[] }>;
  /** The requests running now; a shutdown drains them. Default: a new, private set. */
  inFlight?: InFlightRequests;
  /**
   * What `/metrics` shows; given when something else adds to it too (charges settled late, by
   * billing). Default: {@link createServerMetrics} of the registry and `inFlight`.
   */
  metrics?: Metrics;
  /** A pino logger; default: no logs. */
  logger?: FastifyBaseLogger;
  /**
   * Longest time a client may leave its answer, or a stream, unread before it is disconnected;
   * default CLIENT_STALL_TIMEOUT_MS (write-event-stream.ts).
   */
  clientStallTimeoutMs?: number;
  /** Longest time a client may take to send a whole request; default {@link REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
  /**
   * Longest time a client may take to send a request's headers; default
   * {@link HEADERS_TIMEOUT_MS}, never more than the request timeout.
   */
  headersTimeoutMs?: number;
  /** Longest pause in a request body's arrival (then 408); default {@link BODY_STALL_TIMEOUT_MS}. */
  bodyStallTimeoutMs?: number;
  /** Each chat request's log line carries its messages (`log_prompts: true`). Default: never. */
  logPrompts?: boolean;
}

/** Answers `error` in the contract's shape, with its status and headers (retry-after, ...). */
function sendError(reply: FastifyReply, error: AppError): FastifyReply {
  return reply.code(error.status).headers(errorHeaders(error)).send(toWireError(error));
}

export { CLIENT_CLOSED_STATUS } from "./record-request.ts";

/** Longest time a client may take to send a whole request, headers and body (then 408). */
export const REQUEST_TIMEOUT_MS = 300_000;

/** Longest time a client may take to send a request's headers (then 408); Node's default. */
export const HEADERS_TIMEOUT_MS = 60_000;

/**
 * Longest time a request's body, being read, may go without a byte arriving (then 408, its bytes
 * of the body budget given back): between Apache's 20 s and nginx's 60 s. A client that means to
 * send its body sends it in one go (a chat request is serialised before it is sent), and TCP's
 * own retransmissions leave a gap that long only after five or more losses in a row; a body
 * paused longer is a client gone, or one stalling on purpose (end-stalled-body.ts).
 */
export const BODY_STALL_TIMEOUT_MS = 30_000;

/** During a store outage, how often a refused request's warning is logged (with its stack). */
export const STORE_OUTAGE_LOG_INTERVAL_MS = 10_000;

/** The server's metrics: its requests, and, when scraped, the requests in flight and each model's load. */
export function createServerMetrics(registry: ModelRegistry, inFlight: InFlightRequests): Metrics {
  return new Metrics({
    inFlight: () => inFlight.size,
    models: () => [
      ...registry.list().map((entry) => ({
        model: entry.model.id,
        status: getModelStatus(entry),
        load: registry.loadOf(entry.model.id),
        endpoints: entry.engine?.endpoints?.(),
        upstream: entry.engine?.upstreamActivity?.(),
      })),
      // No longer in the catalogue, but its requests still run: they stay counted until they end.
      ...registry.listRemovedIds().map((id) => ({ model: id, load: registry.loadOf(id) })),
    ],
  });
}

/** Builds the Fastify app: routes, authentication, JSON parsing and the one error mapping. */
export function buildApp(dependencies: AppDependencies): FastifyInstance {
  const requestTimeoutMs = dependencies.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  // Node lets the request timeout lapse while the headers timeout is longer (seen on 24.21):
  // the headers bound is never the looser of the two.
  const headersTimeoutMs = Math.min(dependencies.headersTimeoutMs ?? HEADERS_TIMEOUT_MS, requestTimeoutMs);
  const bodyLimitBytes = dependencies.bodyLimitBytes ?? 8 * 1024 * 1024;
  // A stall bound at or past the request timeout never lapses first: Node's 408 comes instead.
  const stalls = { stallMs: dependencies.bodyStallTimeoutMs ?? BODY_STALL_TIMEOUT_MS };
  const bodyBudget =
    dependencies.bodyBudgetBytes === undefined
      ? BodyBudget.forHeap(bodyLimitBytes, stalls)
      : BodyBudget.sharedBy(dependencies.bodyBudgetBytes, bodyLimitBytes, stalls);
  dependencies.watchRevocations?.((publicId) => bodyBudget.cutBodiesOf(publicId));
  const timeouts = { headersTimeoutMs, requestTimeoutMs };
  const app = Fastify({
    ...(dependencies.logger === undefined ? { logger: false } : { loggerInstance: dependencies.logger }),
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: bodyLimitBytes,
    // Node's own default, which Fastify turns off: without it a client that sends its body a
    // byte now and then (or never finishes it) holds its connection for ever, key or no key.
    requestTimeout: requestTimeoutMs,
    // How often Node looks for requests past their bounds, which lapse up to that much late: a
    // quarter of the headers bound, at most 5 s (Node's 30 s let the one-minute bound lapse at 90 s).
    // A missing Host is refused by the onRequest hook below, in the contract's shape.
    http: {
      connectionsCheckingInterval: Math.min(5_000, Math.max(50, headersTimeoutMs / 4)),
      requireHostHeader: false,
    },
    // Requests the HTTP parser refuses, or that never arrive in full, are answered in the
    // contract's error shape too.
    clientErrorHandler: (error, socket) => {
      const refused = answerClientError(error, socket, timeouts);
      if (refused === undefined) return;
      // Logged and counted as requests too (a flood of broken clients shows), under no route or
      // model: the request line every answered request has, with the id its answer carries.
      const { requestId: reqId, error: answered } = refused;
      app.log.info({ reqId, route: "unknown", status: answered.status, error: answered.code }, "request");
      metrics.observe({
        route: "unknown",
        model: "",
        status: answered.status,
        seconds: 0,
        promptTokens: undefined,
        completionTokens: undefined,
        costNano: undefined,
        firstTokenSeconds: undefined,
        engineSeconds: undefined,
      });
    },
    genReqId: (request) => createRequestId(request.headers["x-request-id"]),
    requestIdHeader: false,
    ajv: {
      customOptions: { coerceTypes: false, removeAdditional: false, useDefaults: false, allErrors: false },
    },
    // Path parameters as long as a request line can be (Node's 16 KiB header bound): Fastify's
    // 100 characters refused a longer id before its key was looked at, with a 400 about escapes;
    // such an id now reaches its route, after the key, and is not found there.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 16_384 },
    rewriteUrl: (request) => normalizeRequestTarget(request.url ?? "/"),
    // The onRequest hook below answers requests that arrive while draining, in the contract's
    // shape; Fastify's own 503 has neither that shape nor an x-request-id.
    return503OnClosing: false,
    // A path the router cannot decode (a `%` without two hex digits after it) is answered in the
    // contract's shape too, with its request id; Fastify's own answer has neither.
    frameworkErrors: (error, request, reply) => {
      const appError =
        error.code === "FST_ERR_BAD_URL" || error.code === "FST_ERR_MAX_PARAM_LENGTH"
          ? new AppError(
              "invalid_http_request",
              "The request URL is not valid: every '%' in its path must start an escape of two hex digits, and the escapes must spell UTF-8 (write a '%' itself as %25).",
            )
          : normalizeError(error, undefined, { bodyLimitBytes });
      annotate(request, { error: appError.code });
      // Answered before routing: no onResponse hook runs, so the request's log line and metrics
      // are written here, once the answer is out.
      reply.raw.once("close", () =>
        record(request as FastifyRequest, reply as FastifyReply, !reply.raw.writableFinished),
      );
      allowPageToRead(request, reply as FastifyReply);
      void sendError((reply as FastifyReply).header("x-request-id", request.id), appError);
    },
  });

  app.decorateRequest("tollgateState", null);
  app.decorateRequest("bodyHold", null);
  app.removeAllContentTypeParsers();
  registerJsonBodyParser(app);

  app.server.headersTimeout = headersTimeoutMs;
  forwardExpectations(app, bodyLimitBytes);
  app.server.on("connect", (_request, socket) => refuseConnect(socket));

  const inFlight = dependencies.inFlight ?? new InFlightRequests();
  const adminRoutes = dependencies.registerAdminRoutes === undefined ? undefined : dependencies;
  // Hooks with nothing to wait for take Fastify's callback form, which costs no promise.
  app.addHook("onRequest", (request, reply, done) => {
    reply.header("x-request-id", request.id);
    const headers = request.headers;
    // Set first, so errors carry them too.
    allowPageToRead(request, reply);
    if (headers.host === undefined || headers.expect !== undefined) {
      const refusal = refuseRequestHead(request.raw);
      if (refusal !== undefined) {
        if (refusal.closeConnection) reply.header("connection", "close");
        done(refusal.error);
        return;
      }
    }
    // Keep-alive connections can still bring requests while the server drains.
    if (inFlight.closing && request.url.startsWith("/v1/")) {
      reply.header("connection", "close");
      done(shuttingDownError());
      return;
    }
    // A request whose connection closes before its answer is complete gets its log line and
    // metrics then (Fastify's onResponse waits for a finish that never comes): 499 when its client
    // left (a CSV export it stopped reading, a body it never finished sending), or the answer Node
    // gave on the socket itself (408). A chat request that reached its handler records itself
    // once settled, with what it was charged.
    reply.raw.once("close", () => {
      if (reply.raw.writableFinished || stateOf(request).recordsItself) return;
      const refused = refusedByClientError.get(request.raw);
      if (refused === undefined) return record(request, reply, true);
      annotate(request, { error: refused.code });
      reply.code(refused.status);
      record(request, reply, false);
    });
    // A body no route reads is not read: the answer goes at once, and the body is dropped as it
    // comes (Fastify read a whole body for the not-found handler, held as the request went on).
    // A preflight carries none: an `OPTIONS` with one is not served.
    if ((request.is404 || request.method === "OPTIONS") && carriesBody(request.raw)) {
      notFoundError(request, adminRoutes).then(done, done);
      return;
    }
    done();
  });

  const metrics = dependencies.metrics ?? createServerMetrics(dependencies.registry, inFlight);

  const record = createRequestRecorder(dependencies.registry, metrics);
  app.addHook("onResponse", (request, reply, done) => {
    boundUnreadBody(request.raw, requestTimeoutMs - reply.elapsedTime, stalls.stallMs);
    record(request, reply, !reply.raw.writableFinished);
    done();
  });

  // One line for an outage's run of refusals, then one every 10 s (each request has its own line).
  const logStoreOutage = throttleLog(STORE_OUTAGE_LOG_INTERVAL_MS);
  app.setErrorHandler((error, request, reply) => {
    const appError = normalizeError(error, request.body, { bodyLimitBytes });
    annotate(request, { error: appError.code });
    // Fastify closes the connection after refusing a body, and with the rest of the body still
    // coming the close often reaches the client as a reset, before it could read the 413. Kept
    // open, the connection reads and drops the rest (bounded as after any early answer: see the
    // onResponse hook), and the client gets its answer whenever it stops sending to read it.
    // A body never asked for (`Expect: 100-continue`, refused before the 100) is not waited for:
    // the connection ends with the answer (see sendContinue).
    if (awaitsContinue(request.raw)) reply.header("connection", "close");
    else {
      if (appError.code === "request_too_large") {
        if (reply.raw.shouldKeepAlive) reply.removeHeader("connection");
        else reply.header("connection", "close");
      }
      // Draining: no next request on this connection, whatever failed (a request cut while it
      // waited for its model, refused before it began).
      else if (inFlight.closing) reply.header("connection", "close");
      // Answered before its body came (a 413, a refused key) on a connection that closes after
      // the answer (the client asked for it, HTTP/1.0, a drain): closed once the body came, not
      // under it, or the reset the rest of it meets loses the client its answer.
      closeAfterUnreadBody(request.raw);
    }
    // A fault thrown as it was (a bug anywhere in handling the request) is logged here, with its
    // stack and the request id. An `internal_error` that code built itself is not: its maker (an
    // engine that failed while generating) logged it already, with the request id and more (the
    // model, the endpoint), and logging it again repeated the same stack as its cause.
    if (appError.code === "internal_error" && appError !== error)
      request.log.error({ err: error }, "request failed");
    else if (appError.code === "store_unavailable")
      logStoreOutage((skipped) =>
        request.log.warn(
          { err: error, ...(skipped > 0 ? { refusedSinceLastLine: skipped } : {}) },
          appError instanceof RateLimitsUnavailableError
            ? "Redis is unavailable: a rate-limited key's request refused (fail-closed)"
            : "the store is unavailable",
        ),
      );
    void sendError(reply, appError);
  });

  app.setNotFoundHandler(async (request, reply) =>
    sendError(reply, await notFoundError(request, adminRoutes)),
  );

  registerOperationRoutes(app, { dependencies, inFlight, metrics });

  const keyLimits = dependencies.keyLimits;
  const isLimited = (key: RequestKey) =>
    keyLimits !== undefined && (key.rpm !== undefined || key.tpm !== undefined);

  app.register(async (authenticated) => {
    // The key comes before anything about the body (SPEC §11): onRequest runs before parsing.
    authenticated.addHook("onRequest", async (request, reply) => {
      const key = await dependencies.authenticate(readAuthorization(request.raw));
      stateOf(request).key = key;
      // A body is held only for a key that was accepted, each account's bodies to a share of
      // the budget (body-budget.ts), its bytes taken as they are read (preParsing below); given
      // back once the answer is out (or the connection gone).
      const hold = bodyBudget.admit(request.raw, bodyLimitBytes, key.accountId ?? key.publicId, key.publicId);
      if (hold instanceof AppError) {
        // Its body is not read: the connection ends with the answer.
        reply.header("connection", "close");
        throw hold;
      }
      if (hold !== undefined) {
        request.bodyHold = hold;
        reply.raw.once("finish", hold.giveBack);
        reply.raw.once("close", hold.giveBack);
      }
      // A chat request reports each bucket when it spends it; what it never reached (refused
      // before the take) is reported on its way out, in onSend. One limiter call per bucket,
      // which on Redis is one round trip.
      if (isLimited(key) && request.routeOptions.url !== CHAT_COMPLETIONS_PATH) {
        await keyLimits?.report(key, (name, value) => {
          reply.header(name, value);
        });
      }
    });
    // After the root's preParsing hook, which asks for a body that waits for `100 Continue`.
    authenticated.addHook("preParsing", countHeldBody);
    authenticated.addHook("onSend", (request, reply, payload, done) => {
      const key = stateOf(request).key;
      const reporting =
        key !== undefined && isLimited(key) && request.routeOptions.url === CHAT_COMPLETIONS_PATH
          ? keyLimits?.report(
              key,
              (name, value) => {
                reply.header(name, value);
              },
              (name) => reply.hasHeader(name),
            )
          : undefined;
      if (reporting === undefined) done(null, payload);
      else reporting.then(() => done(null, payload), done);
    });
    dependencies.registerAdminRoutes?.(authenticated, getKey);
    const chat = new ChatService({
      registry: dependencies.registry,
      admission: dependencies.admission ?? unlimitedAdmission,
    });
    registerChatCompletionRoutes(authenticated, {
      chat,
      getKey,
      inFlight,
      annotate,
      logPrompts: dependencies.logPrompts === true,
      recordClosed: record,
      recordsOwnClose: (request) => {
        stateOf(request).recordsItself = true;
      },
      clientStallTimeoutMs: dependencies.clientStallTimeoutMs,
    });
    registerModelRoutes(authenticated, { registry: dependencies.registry, getKey });
  });

  registerCorsPreflight(app);

  return app;
}
