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

/** Whether the key may use the model: every model when the key names none, else exact ids. */
export function isModelAllowedForKey(key: Pick<RequestKey, "allowedModels">, modelId: string): boolean {
  return key.allowedModels === undefined || key.allowedModels.includes(modelId);
}
