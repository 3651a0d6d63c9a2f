import type { KeyRole } from "../store/store.ts";

/** The key a request was made with, once the authenticator has accepted it. */
export interface AuthenticatedKey {
  /** The public part of the key (`sk-tg-<publicId>-...`); safe to log. */
  publicId: string;
  /** The account the request spends from; `undefined` for admin keys. */
  accountId: string | undefined;
  role: KeyRole;
  /** Models the key may use; `undefined` means every model. */
  allowedModels: string[] | undefined;
  /** Requests per minute; `undefined` means no limit. */
  rpm: number | undefined;
  /** Tokens per minute; `undefined` means no limit. */
  tpm: number | undefined;
  /** The operator's label for the key; may be empty. */
  name: string;
}
