import { createHash } from "node:crypto";
import { posix } from "node:path";
import type { ModelUri } from "./parse-model-uri.ts";

const maxReadableLength = 120;

/**
 * The stable name of a URI's file in the models folder, known without the network (so an offline
 * start can find an earlier download): a readable part, then 8 hex digits of the URI's SHA-256 so
 * that different URIs never share a file. `hf:Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M` becomes
 * `hf_Qwen_Qwen2.5-0.5B-Instruct-GGUF_Q4_K_M-<hash>.gguf`. A quantisation is matched without
 * regard to case, so `:q4_k_m` and `:Q4_K_M` name the same file.
 */
export function createModelFileName(uri: ModelUri): string {
  const { readable, canonical } = describe(uri);
  const hash = createHash("sha256").update(canonical).digest("hex").slice(0, 8);
  const safe = readable
    .replace(/\.gguf$/i, "")
    .replace(/[^A-Za-z0-9._-]+/g, "_")
    .replace(/^[._-]+/, "")
    .slice(0, maxReadableLength);
  return `${safe === "" ? "model" : safe}-${hash}.gguf`;
}

function describe(uri: ModelUri): { readable: string; canonical: string } {
  switch (uri.type) {
    case "hugging-face": {
      const repository = `hf_${uri.organization}_${uri.repository}`;
      const file = uri.file;
      switch (file.type) {
        case "quant": {
          const quant = file.quant.toUpperCase();
          return {
            readable: `${repository}_${quant}`,
            canonical: `hf:${uri.organization}/${uri.repository}:${quant}`,
          };
        }
        case "path":
          return { readable: `${repository}_${file.path}`, canonical: uri.text };
        case "only-gguf":
          return { readable: repository, canonical: uri.text };
        default: {
          const unexpected: never = file;
          throw new Error(`unexpected file selector ${JSON.stringify(unexpected)}`);
        }
      }
    }
    case "url":
      return {
        readable: `${uri.url.hostname}_${posix.basename(decodeURIComponentSafely(uri.url.pathname))}`,
        canonical: canonicalUrl(uri.url),
      };
    default: {
      const unexpected: never = uri;
      throw new Error(`unexpected model URI ${JSON.stringify(unexpected)}`);
    }
  }
}

/**
 * Query parameters of the signing schemes of object stores and CDNs (S3 and its clones, Google
 * Cloud Storage, Azure SAS, CloudFront): they say who may read the file and until when, not
 * which file it is. Matched without regard to case.
 */
const SIGNING_PARAMETER =
  /^(?:x-amz-.*|x-goog-.*|googleaccessid|awsaccesskeyid|expires|signature|policy|key-pair-id|sv|ss|srt|sp|se|st|spr|sig|sr|si|skoid|sktid|skt|ske|sks|skv)$/i;

/**
 * A URL as it names its file: without its user and password, nor the parameters of a signed URL
 * (SIGNING_PARAMETER), which change whenever a secret is rotated or a signature expires: each
 * new signature of the same file was downloaded again under a new name, the old copy left
 * behind (found by a download review). A URL with neither is named as before.
 */
function canonicalUrl(url: URL): string {
  const named = new URL(url.href);
  named.username = "";
  named.password = "";
  for (const name of [...named.searchParams.keys()])
    if (SIGNING_PARAMETER.test(name)) named.searchParams.delete(name);
  // Unchanged where nothing was taken out: names of earlier downloads stay valid.
  return named.href;
}

function decodeURIComponentSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
