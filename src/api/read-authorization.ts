import type { IncomingMessage } from "node:http";
import { AppError } from "../errors/app-error.ts";

/**
 * The request's `Authorization` header, refused (401) where it comes more than once: Node keeps
 * the first and drops the others, so the key a proxy adds after a client's own was ignored for
 * the client's, without a word. Looked for only where the header came at all.
 */
export function readAuthorization(request: IncomingMessage): string | undefined {
  const value = request.headers.authorization;
  if (value === undefined) return undefined;
  const raw = request.rawHeaders;
  let seen = 0;
  for (let index = 0; index < raw.length; index += 2) {
    const name = raw[index] as string;
    if (name.length === 13 && name.toLowerCase() === "authorization" && ++seen > 1) {
      throw new AppError(
        "invalid_api_key",
        "The request sends more than one Authorization header; send one, with the key.",
      );
    }
  }
  return value;
}
