import type { Pool } from "undici";
import { ConnectionSlots } from "./connection-slots.ts";
import { createUpstreamPool } from "./create-upstream-pool.ts";
import { listEndpointNames } from "./list-endpoint-names.ts";
import { listEndpointSecrets } from "./list-endpoint-secrets.ts";
import type { UpstreamSettings } from "./upstream-settings.ts";

/** One configured upstream server, with its keep-alive connection pool. */
export interface UpstreamEndpoint {
  /** Position in the model's `endpoints` list, from 0. */
  index: number;
  /**
   * Origin and path, without credentials or query, `#n` after it where two of the model's
   * endpoints share one (set by the engine): the endpoint's name in logs and `/metrics`.
   */
  label: string;
  /** `{base path}/chat/completions` with the base URL's query (Azure's `api-version`), if any. */
  path: string;
  /** The base URL's origin (`https://host:port`). */
  origin: string;
  /** `{base path}/models` with the base URL's query: the upstream's model list. */
  modelsPath: string;
  /**
   * Sent with every request: JSON in, an uncompressed event stream out, the endpoint's key and
   * its own headers.
   */
  headers: Record<string, string>;
  /**
   * The endpoint's credentials and configured values (list-endpoint-secrets.ts), longest first:
   * removed from whatever the upstream says before it reaches a client or a log line, since an
   * upstream may repeat what it was sent in its errors.
   */
  secrets: readonly string[];
  /**
   * How the upstream may name its own server (list-endpoint-names.ts), longest first: replaced by
   * "the upstream server" in whatever it says that reaches a client.
   */
  names: readonly string[];
  pool: Pool;
  /**
   * Whether requests to this endpoint carry `stream_options`. Cleared, for the engine's life, the
   * first time the endpoint refuses the field (servers that do not know it refuse every request
   * that has it): a 400 that names it, then an answer to the same request without it. Usage is
   * then estimated where the endpoint reports none.
   */
  takesStreamOptions: boolean;
  /**
   * Whether the completion bound goes to this endpoint as `max_tokens`. Cleared, for the engine's
   * life, the first time the endpoint refuses it and names `max_completion_tokens` instead
   * (OpenAI's reasoning models), and answers the same request with that; the bound then goes as
   * that.
   */
  takesMaxTokens: boolean;
  /**
   * The attempts not sent yet (waiting for one of `max_connections`, or for a connection), each
   * by what sends it elsewhere: when the endpoint begins to rest, they do not wait for it.
   */
  unsent: Set<() => void>;
  /** `max_connections`, kept in front of the pool (connection-slots.ts); none without a bound. */
  slots: ConnectionSlots | undefined;
}

/**
 * Creates an endpoint's pool: keep-alive HTTP/1.1 connections (as many as the load needs, or
 * `maxConnections`), the connect timeout set on the socket, each request told whether its
 * connection was kept alive from an earlier one (create-upstream-pool.ts). The engine watches
 * first-byte and idle times itself (`create-stall-watchdog.ts`), so undici's own header and body timeouts are off.
 */
export function createUpstreamEndpoint(options: {
  index: number;
  baseUrl: string;
  apiKey: string | undefined;
  /** The endpoint's own headers (lower-case names), after Tollgate's. */
  headers?: Readonly<Record<string, string>> | undefined;
  settings: UpstreamSettings;
}): UpstreamEndpoint {
  const url = new URL(options.baseUrl);
  const basePath = url.pathname.replace(/\/+$/, "");
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "text/event-stream",
  };
  if (options.apiKey !== undefined) headers.authorization = `Bearer ${options.apiKey}`;
  // Defined, not assigned: a header named `__proto__` was dropped.
  for (const [name, value] of Object.entries(options.headers ?? {}))
    Object.defineProperty(headers, name, { value, enumerable: true, writable: true, configurable: true });
  // The body is read as it comes, as text: a compressed one could not be. Set after the
  // endpoint's own headers, which cannot ask for anything else.
  headers["accept-encoding"] = "identity";
  return {
    index: options.index,
    label: `${url.origin}${basePath}`,
    path: `${basePath}/chat/completions${url.search}`,
    origin: url.origin,
    modelsPath: `${basePath}/models${url.search}`,
    headers,
    secrets: listEndpointSecrets(options),
    names: listEndpointNames(options.baseUrl),
    takesStreamOptions: true,
    takesMaxTokens: true,
    unsent: new Set(),
    slots:
      options.settings.maxConnections === undefined
        ? undefined
        : new ConnectionSlots(options.settings.maxConnections),
    pool: createUpstreamPool(url.origin, {
      connections: options.settings.maxConnections ?? null,
      pipelining: 1,
      connect: { timeout: options.settings.connectTimeoutMs },
      headersTimeout: 0,
      bodyTimeout: 0,
      keepAliveTimeout: 4_000,
    }),
  };
}
