import type { RequestKey } from "../../src/chat/request-key.ts";
import { AppError } from "../../src/errors/app-error.ts";

/**
 * An app's `authenticate` for tests of the HTTP edge: `Bearer good` is a user key allowed no
 * model and no limits; anything else is refused as an invalid key.
 */
export async function acceptOneKey(authorization: string | undefined): Promise<RequestKey> {
  if (authorization !== "Bearer good") throw new AppError("invalid_api_key", "Not a key.");
  return {
    publicId: "good",
    accountId: undefined,
    role: "user",
    allowedModels: [],
    rpm: undefined,
    tpm: undefined,
  };
}
