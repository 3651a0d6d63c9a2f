/** Where `hf:` model URIs are resolved and downloaded from, and the token sent there. */
export interface HuggingFaceEndpoint {
  /** Origin and optional base path, without a trailing slash; default `https://huggingface.co`. */
  baseUrl: string;
  /** Bearer token for private and gated repositories (`HF_TOKEN`); `undefined` when not set. */
  token: string | undefined;
}

/** The endpoint from `TOLLGATE_HF_ENDPOINT` (tests and mirrors) and `HF_TOKEN`. */
export function resolveHuggingFaceEndpoint(env: NodeJS.ProcessEnv = process.env): HuggingFaceEndpoint {
  const configured = env.TOLLGATE_HF_ENDPOINT;
  const baseUrl = configured === undefined || configured === "" ? "https://huggingface.co" : configured;
  const token = env.HF_TOKEN;
  return {
    baseUrl: baseUrl.replace(/\/+$/, ""),
    token: token === undefined || token === "" ? undefined : token,
  };
}
