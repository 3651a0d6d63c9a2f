import { shortenText } from "../../errors/cut-text.ts";
import { ModelDownloadError } from "./model-download-error.ts";

/** Where `hf:` model URIs are resolved and downloaded from, and the token sent there. */
export interface HuggingFaceEndpoint {
  /** Origin and optional base path, without a trailing slash; default `https://huggingface.co`. */
  baseUrl: string;
  /** Bearer token for private and gated repositories (`HF_TOKEN`); `undefined` when not set. */
  token: string | undefined;
}

/**
 * The endpoint from `TOLLGATE_HF_ENDPOINT` (tests and mirrors) and `HF_TOKEN`. Throws a
 * {@link ModelDownloadError} naming the variable when it is not an http(s) URL (every download
 * needs it: its origin is where HF_TOKEN may go).
 */
export function resolveHuggingFaceEndpoint(env: NodeJS.ProcessEnv = process.env): HuggingFaceEndpoint {
  const configured = env.TOLLGATE_HF_ENDPOINT;
  const baseUrl = configured === undefined || configured === "" ? "https://huggingface.co" : configured;
  const protocol = URL.canParse(baseUrl) ? new URL(baseUrl).protocol : undefined;
  if (protocol !== "http:" && protocol !== "https:") {
    const shown = shortenText(baseUrl);
    throw new ModelDownloadError(
      "misconfigured",
      `TOLLGATE_HF_ENDPOINT must be an http:// or https:// URL such as https://huggingface.co (got ${JSON.stringify(shown)}); fix or unset it.`,
    );
  }
  const parsed = new URL(baseUrl);
  if (parsed.username !== "" || parsed.password !== "") {
    // Never shown: the part before `@` is a secret. fetch refuses such a URL with a riddle
    // ("Request cannot be constructed from a URL that includes credentials").
    throw new ModelDownloadError(
      "misconfigured",
      `TOLLGATE_HF_ENDPOINT holds a user and password (user:password@), which are not sent: give the mirror's token in HF_TOKEN instead (sent as a Bearer token to that origin only), and write the URL without them, such as ${parsed.protocol}//${parsed.host}.`,
    );
  }
  const token = env.HF_TOKEN;
  return {
    baseUrl: baseUrl.replace(/\/+$/, ""),
    token: token === undefined || token === "" ? undefined : token,
  };
}
