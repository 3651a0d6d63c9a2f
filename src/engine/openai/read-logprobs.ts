import type { Logprobs, TokenLogprob } from "../engine.ts";

/** An upstream's log probabilities, checked and rebuilt, and a rough measure of their size. */
export interface ReadLogprobs {
  logprobs: Logprobs;
  /**
   * About the characters they take as JSON, without the field names: each token's text and bytes
   * and a few for its number. The answer's bound counts them (create-answer-reader.ts), as it
   * counts its text: twenty alternatives a token make them many times the text.
   */
  length: number;
}

/** Characters counted for an entry beyond its token and bytes: its number and punctuation. */
const ENTRY_LENGTH = 16;
/** Characters counted for each byte value: up to three digits and a comma. */
const BYTE_LENGTH = 4;

/**
 * A choice's `logprobs` as an upstream sent it (OpenAI's `{content: [...], refusal: [...]}`),
 * rebuilt with OpenAI's fields only: `token` (a string), `logprob` (a finite number), `bytes`
 * (integers 0 to 255; null where absent), `top_logprobs` (entries of the same three; [] where
 * absent). Anything else an entry holds (llama.cpp's token `id`) is left out: the client gets
 * what the contract describes, serialised by Tollgate. `undefined` where there are none (null,
 * or no entries), and where the value breaks that shape anywhere: a malformed value is dropped
 * whole, as the chunk mapper drops other fields of the wrong type, rather than passed on in part
 * (its tokens would no longer line up with the text) or made a failure of an answer generated
 * and paid for upstream.
 */
export function readLogprobs(value: unknown): ReadLogprobs | undefined {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const { content, refusal } = value as { content?: unknown; refusal?: unknown };
  const size = { length: 0 };
  const readContent = readEntries(content, size);
  const readRefusal = readEntries(refusal, size);
  if (readContent === false || readRefusal === false) return undefined;
  if (readContent === null && readRefusal === null) return undefined;
  return { logprobs: { content: readContent, refusal: readRefusal }, length: size.length };
}

/** A list of entries: null where absent or empty, `false` where malformed. */
function readEntries(value: unknown, size: { length: number }): TokenLogprob[] | null | false {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value)) return false;
  if (value.length === 0) return null;
  const entries: TokenLogprob[] = [];
  for (const item of value as unknown[]) {
    const entry = readEntry(item, size);
    if (entry === undefined) return false;
    const top = (item as { top_logprobs?: unknown }).top_logprobs;
    const alternatives: TokenLogprob["top_logprobs"] = [];
    if (top !== undefined && top !== null) {
      if (!Array.isArray(top)) return false;
      for (const other of top as unknown[]) {
        const alternative = readEntry(other, size);
        if (alternative === undefined) return false;
        alternatives.push(alternative);
      }
    }
    entries.push({
      token: entry.token,
      logprob: entry.logprob,
      bytes: entry.bytes,
      top_logprobs: alternatives,
    });
  }
  return entries;
}

/** One `{token, logprob, bytes}`, or `undefined` where malformed. */
function readEntry(
  value: unknown,
  size: { length: number },
): { token: string; logprob: number; bytes: number[] | null } | undefined {
  if (typeof value !== "object" || value === null) return undefined;
  const { token, logprob, bytes } = value as { token?: unknown; logprob?: unknown; bytes?: unknown };
  if (typeof token !== "string" || typeof logprob !== "number" || !Number.isFinite(logprob)) return undefined;
  const readBytes = bytes === undefined || bytes === null ? null : readByteList(bytes);
  if (readBytes === undefined) return undefined;
  size.length += ENTRY_LENGTH + token.length + BYTE_LENGTH * (readBytes?.length ?? 0);
  return { token: token.toWellFormed(), logprob, bytes: readBytes };
}

/** A list of byte values (integers 0 to 255), as it came; `undefined` where it is not one. */
function readByteList(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return undefined;
  for (const byte of value as unknown[]) {
    if (typeof byte !== "number" || !Number.isInteger(byte) || byte < 0 || byte > 255) return undefined;
  }
  return value as number[];
}
