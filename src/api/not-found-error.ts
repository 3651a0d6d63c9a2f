import type { FastifyRequest } from "fastify";
import type { RequestKey } from "../chat/request-key.ts";
import { AppError } from "../errors/app-error.ts";
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
    const key = await admin.authenticate(request.headers.authorization);
    if (key.role !== "admin") throw adminKeyRequired();
  }
  return new AppError("not_found", `Unknown request URL: ${request.method} ${request.url.split("?")[0]}.`);
}
