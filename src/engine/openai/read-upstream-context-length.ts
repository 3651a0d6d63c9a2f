import { Client } from "undici";

/** The most of a model list read: OpenRouter's, hundreds of models, is about 1 MiB. */
const MAX_MODEL_LIST_BYTES = 8 * 1024 * 1024;
/** The largest context length believed (the most tokens a request may ask for). */
const MAX_CONTEXT_LENGTH = 2_147_483_647;

/**
 * The fields in which OpenAI-compatible servers give a model's context length in their model
 * list, in the order they are read: vLLM's and SGLang's `max_model_len`, OpenRouter's and
 * Together's `context_length`, Groq's `context_window`. OpenAI itself and Ollama give none;
 * llama.cpp's server gives the trained context only (`meta.n_ctx_train`), which may exceed what
 * it serves, so it is not read.
 */
const CONTEXT_FIELDS = ["max_model_len", "context_length", "context_window"] as const;

/**
 * The context length that a model list (the body of `GET /v1/models`: `{ data: [...] }`, or the
 * bare array some servers answer) gives the model named `model`, or `undefined` when it names no
 * such model or gives it no context length in a known field.
 */
export function readContextLengthFromModelList(list: unknown, model: string): number | undefined {
  const entries = Array.isArray(list)
    ? list
    : typeof list === "object" && list !== null
      ? (list as { data?: unknown }).data
      : undefined;
  if (!Array.isArray(entries)) return undefined;
  const entry: unknown = entries.find(
    (candidate: unknown) =>
      typeof candidate === "object" && candidate !== null && (candidate as { id?: unknown }).id === model,
  );
  if (typeof entry !== "object" || entry === null) return undefined;
  for (const field of CONTEXT_FIELDS) {
    const value = (entry as Record<string, unknown>)[field];
    if (Number.isSafeInteger(value) && (value as number) > 0)
      return Math.min(value as number, MAX_CONTEXT_LENGTH);
  }
  return undefined;
}

/**
 * Asks an upstream endpoint for its model list (`GET {base_url}/models`, with the endpoint's key
 * and headers) and reads `model`'s context length from it: `undefined` when the endpoint does not
 * say it (a 404: it has no list). Rejects when the endpoint cannot be asked (down, refused, not JSON, too slow). Goes out
 * on a connection of its own, closed after, so that the endpoint's pool of chat connections and
 * its bound (`max_connections`) are left to the requests.
 */
export async function readUpstreamContextLength(options: {
  /** The endpoint's origin, e.g. `https://api.example.com`. */
  origin: string;
  /** The model list's path and query, e.g. `/v1/models`. */
  path: string;
  /** The endpoint's headers (its key among them). */
  headers: Readonly<Record<string, string>>;
  /** The upstream's name of the model. */
  model: string;
  timeoutMs: number;
  signal: AbortSignal;
}): Promise<number | undefined> {
  const client = new Client(options.origin, {
    connect: { timeout: options.timeoutMs },
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
  });
  const timeout = AbortSignal.timeout(options.timeoutMs);
  try {
    const headers: Record<string, string> = { ...options.headers, accept: "application/json" };
    delete headers["content-type"];
    const response = await client.request({
      method: "GET",
      path: options.path,
      headers,
      signal: AbortSignal.any([options.signal, timeout]),
    });
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of response.body as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_MODEL_LIST_BYTES)
        throw new Error(`the model list is larger than ${MAX_MODEL_LIST_BYTES} bytes`);
      chunks.push(chunk);
    }
    // No model list at all (a gateway without the route): nothing to learn, not a failure to retry
    // each minute.
    if (response.statusCode === 404) return undefined;
    if (response.statusCode !== 200) throw new Error(`the model list answered HTTP ${response.statusCode}`);
    return readContextLengthFromModelList(JSON.parse(Buffer.concat(chunks).toString("utf8")), options.model);
  } finally {
    await client.destroy().catch(() => {});
  }
}
