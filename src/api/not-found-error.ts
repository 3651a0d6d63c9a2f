import type { FastifyRequest } from "fastify";
import type { RequestKey } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
import { shownValue } from "../errors/shown-value.ts";
import { readAuthorization } from "./read-authorization.ts";
import { adminKeyRequired } from "./routes/admin.ts";

/**
 * The answer to a request for a path no route serves: 404, or under `/admin` (when the app has
 * the admin API) the admin key's 401 or 403 first (SPEC section 11): which admin routes there are
 * is not for a caller without one to find out. Thrown, as the key check throws.
 */
export async function notFoundError(
  request: FastifyRequest,
  admin: { authenticate(authorization: string | undefined): Promise<RequestKey> } | undefined,
): Promise<AppError> {
  if (admin !== undefined && /^\/admin(?:[/?]|$)/.test(request.url)) {
    const key = await admin.authenticate(readAuthorization(request.raw));
    if (key.role !== "admin") throw adminKeyRequired();
  }
  const path = request.url.split("?")[0] ?? "";
  const unknown = `Unknown request URL: ${request.method} ${shownValue(path)}.`;
  const advice = adviseOnPath(request.method, path);
  return new AppError("not_found", advice === undefined ? unknown : `${unknown} ${advice}`);
}

/**
 * What to do instead, for a path a client reached by mistake: an API Tollgate does not serve, or
 * its own API's path without `/v1` or with it twice (a client's base URL set without it, or with
 * it where the client adds it again), for which a bare "Unknown request URL" left users guessing.
 */
function adviseOnPath(method: string, path: string): string | undefined {
  // A path so long is no client's base URL gone wrong; the message names it once already.
  if (path.length > 256) return undefined;
  const [, v1, twice, name] =
    /^\/(v1\/)?(v1\/)?(chat\/completions|models|responses|completions|embeddings)(?:\/|$)/.exec(path) ?? [];
  if (name === undefined) return undefined;
  if (v1 === undefined || twice !== undefined) {
    // Only where the path it names serves the method: else that one is a 404 too.
    const methods = SERVED_METHODS[name];
    if (methods !== undefined && !methods.includes(method)) return undefined;
    const served = twice === undefined ? `/v1${path}` : path.slice(3);
    const where =
      twice === undefined
        ? `Tollgate's API is under /v1 (${served}): end the client's base URL in /v1, as in http://HOST:PORT/v1.`
        : `The path has /v1 twice: the client's base URL ends in /v1 and the path adds it again; use ${served}.`;
    return name in OTHER_APIS ? `${where} ${OTHER_APIS[name]}` : where;
  }
  return OTHER_APIS[name];
}

/** The methods of Tollgate's own API paths (the others are advised on whatever the method). */
const SERVED_METHODS: Record<string, readonly string[]> = {
  "chat/completions": ["POST"],
  models: ["GET", "HEAD"],
};

/**
 * Advice for the OpenAI APIs clients reach for that Tollgate does not serve: the Vercel AI SDK's
 * `openai(model)` and LangChain (for some model names, or `useResponsesApi`) call the Responses
 * API by default, and a bare "Unknown request URL" left their users guessing.
 */
const OTHER_APIS: Record<string, string> = {
  responses:
    "Tollgate serves the Chat Completions API (POST /v1/chat/completions), not the Responses API: with the openai SDK call client.chat.completions.create; with the Vercel AI SDK use openai.chat(model) or @ai-sdk/openai-compatible; with LangChain's ChatOpenAI set useResponsesApi: false.",
  completions:
    "Tollgate serves the Chat Completions API (POST /v1/chat/completions), not the legacy Completions API: send the prompt as a user message there.",
  embeddings: "Tollgate does not serve embeddings yet: only POST /v1/chat/completions and GET /v1/models.",
};
