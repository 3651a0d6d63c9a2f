/** The authenticated API key of a request, as the request pipeline needs it. */
export interface RequestKey {
  /** The public part of the key (`sk-tg-<publicId>-...`), safe to log. */
  publicId: string;
  accountId: string | undefined;
  role: "user" | "admin";
  /** Models the key may use; `undefined` means all. */
  allowedModels: readonly string[] | undefined;
  /** Requests per minute; `undefined` means no limit. */
  rpm: number | undefined;
  /** Tokens per minute; `undefined` means no limit. */
  tpm: number | undefined;
}

/**
 * Whether the key may use the model: none for a key of no account (an admin key, which runs no
 * requests: SPEC section 11 then has it refused before anything else about the model, and the
 * model neither listed nor shown to it); every model when the key names none, else exact ids.
 */
export function isModelAllowedForKey(
  key: Pick<RequestKey, "accountId" | "allowedModels">,
  modelId: string,
): boolean {
  if (key.accountId === undefined) return false;
  return key.allowedModels === undefined || key.allowedModels.includes(modelId);
}

/** Why {@link isModelAllowedForKey} refuses the key the model, for its 403 `model_not_allowed`. */
export function describeModelNotAllowed(key: Pick<RequestKey, "accountId">, modelId: string): string {
  return key.accountId === undefined
    ? "Admin keys manage Tollgate and cannot run requests; use an account's API key."
    : `This API key is not allowed to use the model '${modelId}'.`;
}
