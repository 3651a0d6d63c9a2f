import { redactUrl } from "./redact-url.ts";

/**
 * A model URI: where a GGUF file is downloaded from.
 *
 * - `hf:ORG/REPO:QUANT`: the GGUF file in the Hugging Face repository whose name carries the
 *   quantisation (case-insensitive), such as `qwen2.5-0.5b-instruct-q4_k_m.gguf` for `Q4_K_M`.
 * - `hf:ORG/REPO/PATH.gguf`: that file of the repository.
 * - `hf:ORG/REPO`: the repository's only GGUF file.
 * - `https://...` or `http://...`: a plain download URL.
 */
export type ModelUri = HuggingFaceModelUri | UrlModelUri;

export interface HuggingFaceModelUri {
  type: "hugging-face";
  /** The URI as written, its scheme in lower case. */
  text: string;
  organization: string;
  repository: string;
  file: HuggingFaceFileSelector;
}

/** Which file of a Hugging Face repository a URI names. */
export type HuggingFaceFileSelector =
  | { type: "quant"; quant: string }
  | { type: "path"; path: string }
  | { type: "only-gguf" };

export interface UrlModelUri {
  type: "url";
  text: string;
  url: URL;
}

const huggingFacePattern =
  /^hf:([A-Za-z0-9][A-Za-z0-9._-]*)\/([A-Za-z0-9][A-Za-z0-9._-]*)(?::([A-Za-z0-9._-]+)|\/(.+))?$/;

/** Whether `text` starts with a URI scheme (two letters or more, so `C:\` stays a path). */
export function hasUriScheme(text: string): boolean {
  return /^[A-Za-z][A-Za-z0-9+.-]+:/.test(text);
}

/** The model URI that `text` is, or `undefined` when it is not a supported, well-formed one. */
export function parseModelUri(text: string): ModelUri | undefined {
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]+):/.exec(text)?.[1]?.toLowerCase();
  if (scheme === "hf") return parseHuggingFaceUri(text);
  if (scheme !== "http" && scheme !== "https" && scheme !== undefined) return undefined;
  if (scheme === undefined || !URL.canParse(text)) return undefined;
  return { type: "url", text, url: new URL(text) };
}

/** `text` starts with `hf:` in any case (schemes are case-insensitive, RFC 3986 3.1). */
function parseHuggingFaceUri(written: string): HuggingFaceModelUri | undefined {
  // Written `hf:` from here on: `HF:org/repo` is the same model, downloaded to the same file.
  const text = `hf:${written.slice(3)}`;
  const match = huggingFacePattern.exec(text);
  if (match === null) return undefined;
  const [, organization, repository, quant, path] = match;
  if (organization === undefined || repository === undefined) return undefined;
  if (path?.split("/").some((part) => part === "" || part === "." || part === "..")) return undefined;
  const file: HuggingFaceFileSelector =
    quant !== undefined
      ? { type: "quant", quant }
      : path !== undefined
        ? { type: "path", path }
        : { type: "only-gguf" };
  return { type: "hugging-face", text, organization, repository, file };
}

/**
 * The URI as it may be shown in logs and client messages: a URL loses its user, password and
 * query (signed URLs carry secrets there).
 */
export function describeModelUri(uri: ModelUri): string {
  return uri.type === "hugging-face" ? uri.text : redactUrl(uri.url);
}
