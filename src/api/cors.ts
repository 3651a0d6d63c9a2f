import type { IncomingHttpHeaders } from "node:http";
import type { FastifyInstance } from "fastify";

/**
 * Browsers may call the `/v1` API from any web page, as they may call OpenAI's (and llama.cpp's
 * and vLLM's servers by default): a page that holds an API key (the `openai` SDK with
 * `dangerouslyAllowBrowser`, a chat front end) sends it in `Authorization`, never as a cookie,
 * so allowing every origin gives a page nothing it could not do with the key from anywhere. The
 * admin API, `/metrics` and the rest allow none.
 */
export const CORS_PREFIX = "/v1/";

/** What a cross-origin response of the `/v1` API carries: any origin, and the headers a page may read. */
export const CORS_RESPONSE_HEADERS: Readonly<Record<string, string>> = {
  "access-control-allow-origin": "*",
  "access-control-expose-headers": [
    "x-request-id",
    "retry-after",
    "x-should-retry",
    ...["requests", "tokens"].flatMap((dimension) =>
      ["limit", "remaining", "reset"].map((part) => `x-ratelimit-${part}-${dimension}`),
    ),
  ].join(", "),
};

/** Header names as HTTP writes them (tokens), comma-separated: what a preflight may ask to send. */
const HEADER_LIST = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+(?:[ \t]*,[ \t]*[!#$%&'*+.^_`|~0-9A-Za-z-]+)*$/;

/** How long a browser may keep a preflight's answer (Chromium keeps it 2 hours at most). */
const PREFLIGHT_MAX_AGE_SECONDS = 7200;

/**
 * Answers browsers' preflight requests (`OPTIONS` with `access-control-request-method`) for the
 * `/v1` API with 204, without a key (a preflight cannot carry one): any origin, `GET` and `POST`,
 * and the headers the page asked to send (the `openai` SDK sends `x-stainless-*` ones besides
 * `authorization` and `content-type`). An `OPTIONS` that is no preflight gets 404 as before.
 */
export function registerCorsPreflight(app: FastifyInstance): void {
  app.options(`${CORS_PREFIX}*`, async (request, reply) => {
    const method = request.headers["access-control-request-method"];
    if (typeof method !== "string") return reply.callNotFound();
    const asked = request.headers["access-control-request-headers"];
    reply.code(204).headers({
      ...CORS_RESPONSE_HEADERS,
      "access-control-allow-methods": "GET, POST",
      "access-control-allow-headers":
        typeof asked === "string" && HEADER_LIST.test(asked.trim())
          ? asked.trim()
          : "authorization, content-type",
      "access-control-max-age": String(PREFLIGHT_MAX_AGE_SECONDS),
    });
    return reply.send();
  });
}

/**
 * Lets the page read the answer to a browser's request to the `/v1` API (it names its page's
 * origin), errors included: without these headers the page sees an opaque failure instead.
 */
export function allowPageToRead(
  request: { headers: IncomingHttpHeaders; url: string },
  reply: { headers(values: Record<string, string>): unknown },
): void {
  if (request.headers.origin !== undefined && request.url.startsWith(CORS_PREFIX))
    reply.headers(CORS_RESPONSE_HEADERS);
}
