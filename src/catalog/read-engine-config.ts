/**
 * Validates a model's `engine` mapping: `llama` (a local GGUF through node-llama-cpp) or `openai`
 * (upstream OpenAI-compatible servers). Fallback ids are checked against the whole catalogue by
 * `read-models.ts`, once every model is known.
 */
import { resolve } from "node:path";
import type { EngineConfig, LlamaEngineConfig, OpenAiEngineConfig } from "./catalog.ts";
import {
  DEFAULT_MAX_QUEUE,
  DEFAULT_PARALLEL,
  MAX_QUEUE_RANGE,
  PARALLEL_RANGE,
  THREADS_RANGE,
} from "./config-defaults.ts";
import type { ConfigPath } from "./config-error.ts";
import {
  type ConfigIssues,
  type ConfigMapping,
  checkKnownKeys,
  describeValue,
  isAbsent,
  readChoice,
  readHeaderValue,
  readInteger,
  readList,
  readMapping,
  readString,
} from "./config-fields.ts";

const ENGINE_TYPES = ["llama", "openai"] as const;
const LLAMA_KEYS = ["type", "model", "parallel", "max_queue", "threads", "gpu"] as const;
const OPENAI_TUNING = {
  connect_timeout_ms: { field: "connectTimeoutMs", range: { min: 1, max: 600_000 } },
  first_byte_timeout_ms: { field: "firstByteTimeoutMs", range: { min: 1, max: 3_600_000 } },
  idle_timeout_ms: { field: "idleTimeoutMs", range: { min: 1, max: 3_600_000 } },
  max_retries: { field: "maxRetries", range: { min: 0, max: 10 } },
  cooldown_ms: { field: "cooldownMs", range: { min: 0, max: 3_600_000 } },
  max_connections: { field: "maxConnections", range: { min: 1, max: 10_000 } },
} as const;
const OPENAI_KEYS = ["type", "endpoints", "model", "fallbacks", ...Object.keys(OPENAI_TUNING)] as const;
const ENDPOINT_KEYS = ["base_url", "api_key", "headers"] as const;
/**
 * The engine's settings written inside an endpoint: said where they go ("remove it" was the
 * advice for `max_connections`, which applies to each endpoint but is set on the engine).
 */
const ENGINE_KEY_HINTS = Object.fromEntries(
  [...Object.keys(OPENAI_TUNING), "model", "fallbacks"].map((key) => [
    key,
    `belongs to the engine, not to one endpoint; move it beside endpoints:${key === "max_connections" ? " it bounds each endpoint's connections" : " it applies to every endpoint"}`,
  ]),
);
/** A header name: an HTTP token (RFC 9110). */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/**
 * Headers Tollgate sets or the HTTP client manages itself: JSON in, an event stream out (not
 * compressed), the body's length, the connection. `authorization` is the endpoint's `api_key` unless `headers`
 * gives it instead.
 */
const RESERVED_HEADERS = new Set([
  "accept",
  "accept-encoding",
  "connection",
  "content-encoding",
  "content-length",
  "content-type",
  "expect",
  "host",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

const ENGINE_EXAMPLE =
  '{ type: llama, model: "hf:ORG/REPO:Q4_K_M" } or { type: openai, endpoints: [...], model: NAME }';
const URI_SCHEME = /^([A-Za-z][A-Za-z0-9+.-]+):/;

export interface ReadEngineOptions {
  issues: ConfigIssues;
  path: ConfigPath;
  value: unknown;
  /** Relative llama model paths are resolved against this folder. */
  configFolder: string;
  /** The model's id, the default upstream model name; `undefined` when the id itself is invalid. */
  modelId: string | undefined;
}

/** The engine, or `undefined` when it is absent (a problem is recorded by the caller) or invalid. */
export function readEngineConfig(options: ReadEngineOptions): EngineConfig | undefined {
  const { issues, path } = options;
  const engine = readMapping(issues, path, options.value, ENGINE_EXAMPLE);
  if (engine === undefined) return undefined;
  if (isAbsent(engine.type)) {
    issues.add(
      [...path, "type"],
      `missing; write type: llama (a local GGUF file) or type: openai (an upstream server)`,
    );
    return undefined;
  }
  const type = readChoice(issues, [...path, "type"], engine.type, ENGINE_TYPES);
  switch (type) {
    case undefined:
      return undefined;
    case "llama":
      return readLlamaEngine(options, engine);
    case "openai":
      return readOpenAiEngine(options, engine);
    default: {
      const unexpected: never = type;
      throw new Error(`unexpected engine type ${String(unexpected)}`);
    }
  }
}

function readLlamaEngine(options: ReadEngineOptions, engine: ConfigMapping): LlamaEngineConfig | undefined {
  const { issues, path } = options;
  const before = issues.count;
  checkKnownKeys(issues, path, engine, LLAMA_KEYS, {
    endpoints: "belongs to type: openai engines; a llama engine reads a local model file",
    fallbacks: "belongs to type: openai engines; a llama engine has no fallbacks",
  });
  const model = readLlamaModel(options, engine.model);
  const parallel = readInteger(issues, [...path, "parallel"], engine.parallel, PARALLEL_RANGE);
  const maxQueue = readInteger(issues, [...path, "max_queue"], engine.max_queue, MAX_QUEUE_RANGE);
  const threads = readInteger(issues, [...path, "threads"], engine.threads, THREADS_RANGE);
  const gpu = readGpu(options, engine.gpu);
  if (issues.count > before || model === undefined) return undefined;
  return {
    type: "llama",
    model,
    parallel: parallel ?? DEFAULT_PARALLEL,
    maxQueue: maxQueue ?? DEFAULT_MAX_QUEUE,
    threads,
    gpu: gpu ?? "auto",
  };
}

/** A URI is kept as it is; a file path is made absolute against the config file's folder. */
function readLlamaModel(options: ReadEngineOptions, value: unknown): string | undefined {
  const path = [...options.path, "model"];
  if (isAbsent(value)) {
    options.issues.add(path, 'missing; write a GGUF file path or a URI such as "hf:ORG/REPO:Q4_K_M"');
    return undefined;
  }
  const model = readString(options.issues, path, value, {
    example: '"./models/model.gguf" or "hf:ORG/REPO:Q4_K_M"',
  });
  if (model === undefined) return undefined;
  const scheme = URI_SCHEME.exec(model)?.[1]?.toLowerCase();
  if (scheme === undefined) return resolve(options.configFolder, model);
  if (scheme === "hf") {
    if (/^hf:[^/\s:]+\/[^/\s:]+(?:[:/].*)?$/i.test(model)) return model;
    options.issues.add(
      path,
      `${describeValue(model)} is not a Hugging Face model URI; write hf:ORG/REPO:QUANT, such as "hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M"`,
    );
    return undefined;
  }
  if (scheme === "https" || scheme === "http") {
    if (URL.canParse(model)) return model;
    options.issues.add(
      path,
      `${describeValue(model)} is not a valid URL; write a download URL of a .gguf file`,
    );
    return undefined;
  }
  options.issues.add(
    path,
    `"${scheme}:" is not a supported model source; write a file path, "hf:ORG/REPO:QUANT" or an http(s):// URL`,
  );
  return undefined;
}

function readGpu(options: ReadEngineOptions, value: unknown): "auto" | false | undefined {
  if (isAbsent(value)) return undefined;
  if (value === "auto") return "auto";
  if (value === false || value === "false") return false;
  options.issues.add(
    [...options.path, "gpu"],
    `must be "auto" (use a GPU when one is found) or false (CPU only) (got ${describeValue(value)})`,
  );
  return undefined;
}

function readOpenAiEngine(options: ReadEngineOptions, engine: ConfigMapping): OpenAiEngineConfig | undefined {
  const { issues, path } = options;
  const before = issues.count;
  checkKnownKeys(issues, path, engine, OPENAI_KEYS, {
    parallel: "belongs to type: llama engines; an upstream server sets its own concurrency",
    max_queue: "belongs to type: llama engines; an upstream server sets its own queue",
    threads: "belongs to type: llama engines",
    gpu: "belongs to type: llama engines",
  });
  const endpoints = readEndpoints(options, engine.endpoints);
  const model =
    readString(issues, [...path, "model"], engine.model, { example: '"gpt-4o-mini"' }) ?? options.modelId;
  const fallbacks = readFallbacks(options, engine.fallbacks);
  const tuning: Partial<Record<(typeof OPENAI_TUNING)[keyof typeof OPENAI_TUNING]["field"], number>> = {};
  for (const [key, { field, range }] of Object.entries(OPENAI_TUNING)) {
    const value = readInteger(issues, [...path, key], engine[key], range);
    if (value !== undefined) tuning[field] = value;
  }
  if (issues.count > before || endpoints === undefined || model === undefined) return undefined;
  return { type: "openai", endpoints, model, fallbacks, ...tuning };
}

function readEndpoints(
  options: ReadEngineOptions,
  value: unknown,
): OpenAiEngineConfig["endpoints"] | undefined {
  const { issues } = options;
  const path = [...options.path, "endpoints"];
  const example = `[ { base_url: "https://api.example.com/v1", api_key: "\${UPSTREAM_KEY}" } ]`;
  if (isAbsent(value)) {
    issues.add(path, `missing; list the upstream servers, such as ${example}`);
    return undefined;
  }
  const list = readList(issues, path, value, example);
  if (list === undefined) return undefined;
  if (list.length === 0) {
    issues.add(path, `is empty; list at least one upstream server, such as ${example}`);
    return undefined;
  }
  const endpoints: OpenAiEngineConfig["endpoints"] = [];
  list.forEach((item, index) => {
    const itemPath = [...path, index];
    const endpoint = readMapping(issues, itemPath, item, '{ base_url: "https://api.example.com/v1" }');
    if (endpoint === undefined) {
      if (isAbsent(item)) issues.add(itemPath, 'is empty; write { base_url: "https://api.example.com/v1" }');
      return;
    }
    checkKnownKeys(issues, itemPath, endpoint, ENDPOINT_KEYS, ENGINE_KEY_HINTS);
    const baseUrl = readBaseUrl(options, [...itemPath, "base_url"], endpoint.base_url);
    const apiKey = readHeaderValue(issues, [...itemPath, "api_key"], endpoint.api_key, {
      example: `"\${UPSTREAM_KEY}"`,
      secret: true,
      allowEmpty: true,
    });
    const headers = readEndpointHeaders(options, [...itemPath, "headers"], endpoint.headers, {
      hasApiKey: apiKey !== undefined && apiKey !== "",
    });
    if (baseUrl === undefined) return;
    endpoints.push({
      baseUrl,
      apiKey: apiKey === "" ? undefined : apiKey,
      ...(headers === undefined || Object.keys(headers).length === 0 ? {} : { headers }),
    });
  });
  return endpoints;
}

/**
 * Extra request headers of an endpoint (Azure's `api-key`, a gateway's own key, OpenRouter's
 * `HTTP-Referer`), names lower-cased. Values may be secrets and are never repeated in messages;
 * an empty value (a `${VAR}` set to nothing) sends no header.
 */
function readEndpointHeaders(
  options: ReadEngineOptions,
  path: ConfigPath,
  value: unknown,
  context: { hasApiKey: boolean },
): Record<string, string> | undefined {
  const { issues } = options;
  const mapping = readMapping(issues, path, value, `{ api-key: "\${AZURE_OPENAI_KEY}" }`);
  if (mapping === undefined) return undefined;
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  for (const [name, headerValue] of Object.entries(mapping)) {
    const namePath = [...path, name];
    const lower = name.toLowerCase();
    if (!HEADER_NAME.test(name)) {
      issues.add(namePath, "is not a valid header name; use letters, digits and -, such as X-Api-Key");
      continue;
    }
    if (seen.has(lower)) {
      issues.add(namePath, "is given twice (header names ignore case); keep one");
      continue;
    }
    seen.add(lower);
    if (RESERVED_HEADERS.has(lower)) {
      issues.add(namePath, "is set by Tollgate itself; remove it");
      continue;
    }
    if (lower === "authorization" && context.hasApiKey) {
      issues.add(namePath, "would replace the api_key's Authorization header; give one of the two");
      continue;
    }
    if (isAbsent(headerValue)) {
      issues.add(namePath, `has no value; write one, such as "\${UPSTREAM_HEADER}"`);
      continue;
    }
    const text = readHeaderValue(issues, namePath, headerValue, {
      example: `"\${UPSTREAM_HEADER}" (quote numbers)`,
      secret: true,
      allowEmpty: true,
    });
    // Defined, not assigned: a header named `__proto__` was dropped without a word.
    if (text !== undefined && text !== "")
      Object.defineProperty(headers, lower, {
        value: text,
        enumerable: true,
        writable: true,
        configurable: true,
      });
  }
  return headers;
}

/** An http(s) URL; trailing slashes are dropped so paths can be appended with "/". */
function readBaseUrl(options: ReadEngineOptions, path: ConfigPath, value: unknown): string | undefined {
  const example = '"https://api.example.com/v1"';
  if (isAbsent(value)) {
    options.issues.add(path, `missing; write the server's API root, such as ${example}`);
    return undefined;
  }
  const text = readString(options.issues, path, value, { example });
  if (text === undefined) return undefined;
  const url = URL.canParse(text) ? new URL(text) : undefined;
  if (url === undefined || (url.protocol !== "http:" && url.protocol !== "https:")) {
    // The value is not repeated: a URL may carry credentials, perhaps from an environment variable.
    options.issues.add(path, `is not an http(s) URL; write the server's API root, such as ${example}`);
    return undefined;
  }
  if (url.username !== "" || url.password !== "") {
    // Requests go to the URL's origin, which has no credentials: they would be dropped silently.
    options.issues.add(
      path,
      "carries credentials (user:password@), which are not sent; give the server's key as api_key",
    );
    return undefined;
  }
  return text.replace(/\/+$/, "");
}

function readFallbacks(options: ReadEngineOptions, value: unknown): string[] {
  const path = [...options.path, "fallbacks"];
  const list = readList(options.issues, path, value, "[ other-model-id ]") ?? [];
  const fallbacks: string[] = [];
  list.forEach((item, index) => {
    const id = readString(options.issues, [...path, index], item, {
      example: "the id of another catalogue model",
    });
    if (id !== undefined) fallbacks.push(id);
    else if (isAbsent(item))
      options.issues.add([...path, index], "is empty; write the id of another catalogue model");
  });
  return fallbacks;
}
