/**
 * Shortest secret removed from upstream text. A shorter value (`1`, `v1`, `yes`) is no secret
 * anyone could keep, and removing it wherever it occurs would turn ordinary words and numbers of
 * every message into `[redacted]`.
 */
export const MIN_SECRET_LENGTH = 4;

/** Header values that are an authentication scheme and a credential (`Bearer abc`, `Basic abc`). */
const SCHEME_AND_CREDENTIAL = /^(?:Bearer|Basic|Token|ApiKey|Key)\s+(\S.*)$/i;

/**
 * The values an endpoint sends (or is configured with) that an upstream may repeat in an error
 * and no client or log may read: the `api_key`, every configured header's value (and, for
 * `Bearer ...` and the like, the credential alone), the base URL's user, password and query
 * values, each as written and percent-decoded. Values shorter than {@link MIN_SECRET_LENGTH}
 * are left out. Longest first, so that a secret that holds another is removed whole.
 */
export function listEndpointSecrets(options: {
  baseUrl: string;
  apiKey: string | undefined;
  headers?: Readonly<Record<string, string>> | undefined;
}): readonly string[] {
  const secrets = new Set<string>();
  const add = (value: string | undefined) => {
    const trimmed = value?.trim();
    if (trimmed !== undefined && trimmed.length >= MIN_SECRET_LENGTH) secrets.add(trimmed);
  };
  add(options.apiKey);
  for (const value of Object.values(options.headers ?? {})) {
    add(value);
    add(SCHEME_AND_CREDENTIAL.exec(value.trim())?.[1]);
  }
  const url = new URL(options.baseUrl);
  for (const value of [url.username, url.password]) {
    add(value);
    add(decode(value));
  }
  for (const pair of url.search.slice(1).split("&")) {
    const separator = pair.indexOf("=");
    // A bare `?token` is a value too.
    const value = separator === -1 ? pair : pair.slice(separator + 1);
    add(value);
    add(decode(value.replaceAll("+", " ")));
  }
  return [...secrets].sort((a, b) => b.length - a.length);
}

/** Percent-decoded; `undefined` when the text is not valid percent-encoding. */
function decode(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}
