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
 * The signing schemes of object stores and CDNs: a parameter that says a URL is signed by one,
 * and the parameters of that scheme (lower case), which say who may read the file and until
 * when, not which file it is. Names are matched without regard to case.
 */
const SIGNING_SCHEMES: readonly {
  signedBy: (names: ReadonlySet<string>) => boolean;
  drops: (name: string) => boolean;
}[] = [
  // S3 (and its clones) and Google Cloud Storage, version 4.
  { signedBy: (names) => names.has("x-amz-signature"), drops: (name) => name.startsWith("x-amz-") },
  { signedBy: (names) => names.has("x-goog-signature"), drops: (name) => name.startsWith("x-goog-") },
  // S3 and Google Cloud Storage, version 2.
  {
    signedBy: (names) =>
      names.has("signature") && (names.has("awsaccesskeyid") || names.has("googleaccessid")),
    drops: (name) =>
      ["signature", "expires", "awsaccesskeyid", "googleaccessid", "x-amz-security-token"].includes(name),
  },
  // CloudFront.
  {
    signedBy: (names) => names.has("key-pair-id") && (names.has("signature") || names.has("policy")),
    drops: (name) => ["key-pair-id", "signature", "policy", "expires"].includes(name),
  },
  // Azure shared access signatures.
  {
    signedBy: (names) => names.has("sig") && names.has("sv"),
    drops: (name) =>
      /^(?:sv|ss|srt|sp|se|st|spr|sig|sr|si|sdd|ses|skoid|sktid|skt|ske|sks|skv|saoid|suoid|scid)$/.test(
        name,
      ),
  },
];

/**
 * A URL as it names its file: without the parameters of the scheme that signed it, if one did
 * (SIGNING_SCHEMES), which change whenever a signature expires or a key is rotated: each new
 * signature of the same file was downloaded again under a new name, the old copy left behind
 * (found by a download review). The parameters go only from a URL that the scheme's own marker
 * says is signed: on any other URL a short name such as `sv` or `sig` may say which file it is.
 * A URL signed by no known scheme is named as before.
 */
function canonicalUrl(url: URL): string {
  const names = new Set([...url.searchParams.keys()].map((name) => name.toLowerCase()));
  const schemes = SIGNING_SCHEMES.filter((scheme) => scheme.signedBy(names));
  if (schemes.length === 0) return url.href;
  const named = new URL(url.href);
  for (const name of [...named.searchParams.keys()]) {
    if (schemes.some((scheme) => scheme.drops(name.toLowerCase()))) named.searchParams.delete(name);
  }
  return named.href;
}

function decodeURIComponentSafely(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
